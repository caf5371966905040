"""`accelbench run`: quantize → accuracy gate → Triton repository → serve → load sweeps → report.

The composition root: it calls each stage's library API (docs/architecture.md) and owns the output layout::

    <out>/variants/<model>__<target>__<precision>/   variant folders (manifest.json, model, reference/)
    <out>/repository/<target>/                       the Triton model repository served for a local target
    <out>/repository/<target>-vllm/                  engine = "vllm" on a cpu target: its own Triton's repository
    <out>/serve_vllm-<target>.sh                     engine = "vllm" on a GPU target: what that host runs
    <out>/results/<run_id>.json                      one result document per (variant, load profile)
    <out>/report/                                    report.md, report.html, plots/, results.csv/.parquet
    <out>/logs/                                      tritonserver logs
    <out>/run.json                                   what this run did, step by step, with timings

Result documents are named by variant (which includes the target), so ``results/`` folders from several hosts
merge by copying them side by side and running ``accelbench report`` over all of them.

Resume: a variant whose manifest still matches its files and recorded hash is not re-quantized (also one that
`accelbench quantize --out <out>/variants` made with the default recipes); a sweep whose
result document is complete for the same manifest hash and load profile is not re-run (and Triton is not even
started); the report is not re-rendered when its inputs are unchanged. Ctrl-C leaves no process behind:
LocalTriton stops in its context manager and the load generator's process group is ended by the sweep.

What a run measures goes to a ``StepSink`` (``loadtests/events.py``) as well as to disk: each recorded step
and each finished result (``accelbench run --push`` pushes results, the campaign agent steps and results). A
``Cancel`` stops the run between stages and the sweep between steps; the outcome then says ``cancelled``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench import __version__
from accelbench.documents import Accuracy, ResultDocument, VariantManifest, load_result
from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.experiment.progress import Progress
from accelbench.experiment.spec import ExperimentSpec, TargetSpec, check_against_catalog
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.loadtests.events import Cancel, Event, StepFinished, StepSink
from accelbench.loadtests.profiles import LoadProfile
from accelbench.util import atomic_write_json, sha256_file, sha256_json, utc_now_iso

if TYPE_CHECKING:
    from accelbench.loadtests.sweep import SweepOptions
    from accelbench.loadtests.verdict import Limits
    from accelbench.reports.options import ReportOptions
    from accelbench.serving import LocalTriton, RemoteTriton

RUN_RECORD = "run.json"


@dataclass
class RunOutcome:
    out_dir: Path
    report_path: Path
    result_paths: list[Path] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # variants that failed the accuracy gate
    cancelled: bool = False  # stopped on request: the files hold what was finished, a rerun resumes
    # engine = "vllm" on a GPU target: the repository and script written for that host (nothing measured)
    written: list[str] = field(default_factory=list)


@dataclass
class _Variant:
    dir: Path
    manifest: VariantManifest

    @property
    def name(self) -> str:
        return self.manifest.name


def run_experiment(
    spec: ExperimentSpec,
    *,
    out_dir: str | os.PathLike | None = None,
    catalog_path: str | None = None,
    progress: Progress | None = None,
    command: str = "accelbench run",
    sink: StepSink | None = None,
    cancel: Cancel | None = None,
) -> RunOutcome:
    """Run every stage of ``spec``; finished work on disk is reused. Returns where the report is.

    ``sink`` sees each recorded step and each result (measured now or reused), after the file is written.
    Once ``cancel`` is requested the running load step finishes and nothing else starts: the outcome is
    ``cancelled`` and no report is made.
    """
    from accelbench.hardware.catalog import load_catalog

    progress = progress or Progress(quiet=True)
    catalog = load_catalog(catalog_path)
    check_against_catalog(spec, catalog)
    out = Path(out_dir or spec.out)
    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"spec": spec.source, "started_at": utc_now_iso(), "accelbench": __version__}
    outcome = RunOutcome(out_dir=out, report_path=out / "report" / "report.md")
    try:
        for target in spec.measured_targets:
            if not _written_for_gpu(spec, target, catalog.get(target.id)):
                _check_measurable(target, catalog.get(target.id))
        progress.stage(
            "quantize", f"{len(spec.models)} model(s) × {len(spec.measured_targets)} measured target(s)"
        )
        variants = _quantize_all(spec, out, catalog_path, progress, catalog)
        if _stopped(cancel, outcome):
            return outcome
        progress.stage("accuracy gate")
        served = _gate(variants, progress, outcome)
        progress.stage(
            "serve and load-test",
            f"{spec.load.profile.kind} loop, levels {spec.load.profile.to_dict()['levels']}",
        )
        for target in spec.measured_targets:
            if _stopped(cancel, outcome):
                return outcome
            mine = [v for v in served if v.manifest.target == target.id]
            outcome.result_paths += _measure_target(
                spec, target, mine, out, catalog, progress, command, sink, cancel, outcome
            )
        if _stopped(cancel, outcome):
            return outcome
        if outcome.written and not outcome.result_paths:
            return outcome  # only GPU layouts were written: nothing measured to report on
        progress.stage("report")
        _report(spec, out, catalog, progress, outcome)
    finally:
        record.update(finished_at=utc_now_iso(), steps=[r.__dict__ for r in progress.records])
        atomic_write_json(out / RUN_RECORD, record)
    return outcome


def _stopped(cancel: Cancel | None, outcome: RunOutcome) -> bool:
    outcome.cancelled = cancel is not None and cancel.requested
    return outcome.cancelled


def _check_measurable(target: TargetSpec, hw: HardwareTarget) -> None:
    """Measuring here needs this host to be the target: only CPU targets run on the bundled Triton."""
    if target.mode == "local" and hw.toolchain != "onnxruntime-cpu":
        from accelbench.models.toolchains import toolchain_for

        why = toolchain_for(hw).available() if hw.toolchain in ("tensorrt", "neuron") else "no toolchain"
        if why:
            raise ToolchainMissingError(
                f"target {target.id} has mode 'local' but this host cannot run {hw.toolchain} ({why}); "
                "use mode 'project', a 'url' of a Triton on that hardware, or `accelbench plan cloud`"
            )


# ---- quantize -----------------------------------------------------------------------------------------


def _written_for_gpu(spec: ExperimentSpec, target: TargetSpec, hw: HardwareTarget) -> bool:
    """A local GPU target whose models vLLM serves: its repository is written for that host, not run here."""
    from accelbench.experiment.vllm_stage import is_gpu, uses_vllm

    return target.mode == "local" and is_gpu(hw) and all(uses_vllm(spec, m, target, hw) for m in spec.models)


def _quantize_all(
    spec: ExperimentSpec, out: Path, catalog_path: str | None, progress: Progress, catalog: Catalog
) -> list[_Variant]:
    from accelbench.experiment.vllm_stage import uses_vllm, write_variant

    variants: list[_Variant] = []
    for model in spec.models:
        for target in spec.measured_targets:
            hw = catalog.get(target.id)
            if uses_vllm(spec, model, target, hw):  # vLLM reads the checkpoint itself: no quantization
                for precision in model.precisions:
                    with progress.step("vllm", f"{model.uri} {target.id} {precision}") as notes:
                        manifest = write_variant(spec, model, hw, precision, out / "variants")
                        notes.append(f"{manifest.name}: hf/ and engine arguments for vLLM")
                    variants.append(_Variant(out / "variants" / manifest.name, manifest))
                continue
            wanted = [p for p in model.precisions if p != "fp32"] or ["fp32"]
            for precision in wanted:
                variants += _quantize_one(model.uri, target.id, precision, out, catalog_path, progress)
    # the FP32 reference comes back with every precision; keep each variant once, FP32 only if asked for
    unique = {v.name: v for v in variants}
    keep = {(m.uri, p) for m in spec.models for p in m.precisions}
    return [v for v in unique.values() if (v.manifest.source.uri, v.manifest.precision) in keep]


def _quantize_one(
    uri: str, target_id: str, precision: str, out: Path, catalog_path: str | None, progress: Progress
) -> list[_Variant]:
    reused = _reusable_variants(_stamp(out / "variants", uri, target_id, precision))
    label = f"{uri} {target_id} {precision}"
    if reused is not None:
        progress.skip("quantize", label, "manifest hashes match")
        return reused
    from accelbench.models.quantize import QuantizeRequest, quantize

    with progress.step("quantize", label) as notes:
        manifests = quantize(
            QuantizeRequest(
                model=uri,
                target=target_id,
                precision=precision,
                out_dir=out / "variants",
                catalog_path=catalog_path,
            )
        )
        notes.append(", ".join(f"{m.name} {m.verdict}" for m in manifests))
    record_variants(out / "variants", uri, target_id, precision, manifests)
    return [_Variant(out / "variants" / m.name, m) for m in manifests]


def record_variants(
    variants_dir: Path, uri: str, target_id: str, precision: str, manifests: list[VariantManifest]
) -> None:
    """Stamp what quantize made in ``variants_dir`` so that a run with ``--out`` its parent reuses it.

    `accelbench quantize` stamps its default-recipe variants too: a run over the same card then serves them
    instead of quantizing again (the resume rule of ``_reusable_variants``)."""
    done = {
        "uri": uri,
        "source": _source_fingerprint(uri),
        "variants": {m.name: m.manifest_hash for m in manifests},
    }
    atomic_write_json(_stamp(variants_dir, uri, target_id, precision), done)


def _stamp(variants_dir: Path, uri: str, target_id: str, precision: str) -> Path:
    return variants_dir / ".done" / f"{_safe(uri)}__{target_id}__{precision}.json"


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _source_fingerprint(uri: str) -> str:
    """What must not change for a variant to be reused without re-running quantize: the model file or
    card on disk, or (builtin:/hf:) the accelbench version that builds it."""
    scheme, _, rest = uri.partition(":")
    path = Path(rest if scheme == "onnx" else uri)
    if scheme not in ("builtin", "hf") and path.is_file():
        return sha256_file(path)
    return f"{uri}@accelbench-{__version__}"


def _reusable_variants(stamp: Path) -> list[_Variant] | None:
    """The variants a previous run made, when their manifests and files are untouched since."""
    from accelbench.models.manifest import read_manifest, verify_files

    if not stamp.is_file():
        return None
    try:
        import json

        done = json.loads(stamp.read_text())
        if done.get("source") != _source_fingerprint(done["uri"]):
            return None
        variants = []
        for name, want in done["variants"].items():
            vdir = stamp.parent.parent / name
            manifest = read_manifest(vdir)
            if manifest.manifest_hash != want or verify_files(vdir, manifest):
                return None
            variants.append(_Variant(vdir, manifest))
        return variants
    except (BadInputError, ValueError, KeyError, OSError):
        return None


# ---- accuracy gate ------------------------------------------------------------------------------------


def _gate(variants: list[_Variant], progress: Progress, outcome: RunOutcome) -> list[_Variant]:
    """Variants that failed the accuracy gate are not served (the report would rank a broken model)."""
    served = []
    for v in variants:
        acc, verdict = v.manifest.accuracy or Accuracy(), v.manifest.verdict
        progress.note("accuracy", f"{v.name}: {acc.metric} {acc.value} → {verdict}")
        if verdict == "FAIL":
            outcome.excluded.append(v.name)
            progress.note("accuracy", f"{v.name}: excluded from serving ({acc.reason or 'below tolerance'})")
            continue
        served.append(v)
    return served


# ---- serve and load-test ------------------------------------------------------------------------------


def _profile(spec: ExperimentSpec, repeat: int = 1, variant: _Variant | None = None) -> LoadProfile:
    """The spec's [load] profile for this repeat; a generative variant's adds the spec's [workload], the
    [slo] TTFT/TPOT objectives and the variant's own tokenizer folder (or its card's tokenizer)."""
    profile = replace(spec.load.profile, repeat=repeat)
    if variant is None or not _generative(variant):
        return profile
    from accelbench.loadtests.generative import variant_tokenizer

    workload = replace(
        spec.workload, slo_ttft_p99_ms=spec.slo.ttft_p99_ms, slo_tpot_p99_ms=spec.slo.tpot_p99_ms
    )
    card_tokenizer = (variant.manifest.card.get("generative") or {}).get("tokenizer")
    if spec.search is not None:  # the SLO-capacity search plans its own levels
        profile = profile.searching(spec.search)
    return profile.streaming(workload, variant_tokenizer(variant.dir, card_tokenizer))


def _served_by_vllm(variant: _Variant) -> bool:
    from accelbench.experiment.vllm_stage import is_vllm_variant

    return is_vllm_variant(variant.manifest)


def _generative(variant: _Variant) -> bool:
    return variant.manifest.card.get("task") == "text-generation"


def _result_path(out: Path, variant: _Variant, profile: LoadProfile) -> Path:
    from accelbench.loadtests.sweep import result_path

    return result_path(out / "results", variant.name, profile)


def _finished(path: Path, variant: _Variant, profile: LoadProfile) -> bool:
    from accelbench.loadtests.sweep import is_complete

    return is_complete(path, variant.manifest.manifest_hash, profile)


def _measure_target(
    spec: ExperimentSpec,
    target: TargetSpec,
    variants: list[_Variant],
    out: Path,
    catalog: Catalog,
    progress: Progress,
    command: str,
    sink: StepSink | None = None,
    cancel: Cancel | None = None,
    outcome: RunOutcome | None = None,
) -> list[Path]:
    vllm = [v for v in variants if _served_by_vllm(v)]
    if vllm and target.mode == "local":  # vLLM's models run in a Triton of their own (or on the GPU host)
        rest = [v for v in variants if not _served_by_vllm(v)]
        paths = _measure_vllm(spec, target, vllm, out, catalog, progress, command, sink, cancel, outcome)
        if rest:
            paths += _measure_target(spec, target, rest, out, catalog, progress, command, sink, cancel)
        return paths
    return _measure_served(spec, target, variants, out, catalog, progress, command, sink, cancel)


def _measure_vllm(
    spec: ExperimentSpec,
    target: TargetSpec,
    variants: list[_Variant],
    out: Path,
    catalog: Catalog,
    progress: Progress,
    command: str,
    sink: StepSink | None,
    cancel: Cancel | None,
    outcome: RunOutcome | None,
) -> list[Path]:
    from accelbench.experiment import vllm_stage

    hw = catalog.get(target.id)
    if vllm_stage.is_gpu(hw):
        with progress.step("repository", f"{target.id} (vLLM, NGC {vllm_stage.NGC_TAG_SUFFIX})") as notes:
            layout = vllm_stage.write_gpu_layout(
                [v.dir for v in variants], [v.manifest for v in variants], target.id, out
            )
            notes.append(vllm_stage.describe(layout))
        if outcome is not None:
            outcome.written.append(vllm_stage.describe(layout))
        return []
    return _measure_served(spec, target, variants, out, catalog, progress, command, sink, cancel, vllm=True)


def _measure_served(
    spec: ExperimentSpec,
    target: TargetSpec,
    variants: list[_Variant],
    out: Path,
    catalog: Catalog,
    progress: Progress,
    command: str,
    sink: StepSink | None = None,
    cancel: Cancel | None = None,
    vllm: bool = False,
) -> list[Path]:
    # every (variant, repeat) whose result document is not yet complete; repeat 1 keeps today's file name
    paths, todo = [], []
    for repeat in range(1, spec.load.repeats + 1):
        for v in variants:
            profile = _profile(spec, repeat, v)
            path = _result_path(out, v, profile)
            paths.append(path)
            if _finished(path, v, profile):
                run = f" run {repeat}" if spec.load.repeats > 1 else ""
                progress.skip(
                    "load", f"{v.name}{run} on {target.id}", "result complete for this manifest and profile"
                )
                if sink is not None:  # a result reused from disk is a result of this run too
                    sink.result(path, load_result(path), v.manifest)
            else:
                todo.append((v, profile))
    if not todo:
        return paths
    from accelbench.serving.repository import write_repository

    if target.mode == "local":
        from accelbench.serving.server import LocalTriton

        flavor = "local" if catalog.get(target.id).toolchain == "onnxruntime-cpu" else "ngc"
        repo_dir = out / "repository" / (f"{target.id}-vllm" if vllm else target.id)
        extra: dict[str, Any] = {}
        if vllm:
            from accelbench.experiment import vllm_stage

            with progress.step("repository", f"{target.id} ({len(variants)} models, vLLM in Triton)"):
                vllm_stage.write_repository(
                    [v.dir for v in variants], [v.manifest for v in variants], repo_dir, gpu=False
                )
            stub, libs, env = vllm_stage.stub_environment()
            extra = {"stub_env": stub, "library_dirs": libs, "extra_env": env, "start_timeout_s": 420.0}
        else:
            with progress.step("repository", f"{target.id} ({len(variants)} models, {flavor})"):
                write_repository([v.dir for v in variants], repo_dir, flavor, catalog=catalog)
        with progress.step("serve", f"tritonserver for {target.id}" + (" (vLLM)" if vllm else "")) as notes:
            (out / "logs").mkdir(parents=True, exist_ok=True)
            log_name = f"tritonserver-{target.id}{'-vllm' if vllm else ''}.log"
            server = LocalTriton(repo_dir, log_path=out / "logs" / log_name, **extra)
            server.start()
            notes.append(server.http_url)
        try:
            _sweeps(
                server,
                todo,
                out,
                repo_dir,
                progress,
                command,
                _limits(spec),
                spec.workload.prompts_file,
                sink,
                cancel,
                spec.workload.trace_file,
            )
        finally:
            server.stop()  # also on Ctrl-C: no tritonserver outlives the run
    else:
        from accelbench.serving.remote import RemoteTriton

        if target.url is None:  # the spec refuses mode "url" without one
            raise BadInputError(f"target {target.id}: mode 'url' needs url = \"http://HOST:PORT\"")
        with progress.step("serve", f"{target.id} at {target.url}") as notes:
            remote = RemoteTriton(target.url)
            remote.check_live()
            for v in {v.name: v for v, _ in todo}.values():
                remote.check_model(_triton_name(v), v.manifest)
            notes.append(f"Triton {remote.server_version}")
        _sweeps(
            remote,
            todo,
            out,
            None,
            progress,
            command,
            _limits(spec),
            spec.workload.prompts_file,
            sink,
            cancel,
            spec.workload.trace_file,
        )
    return paths


def _triton_name(variant: _Variant) -> str:
    from accelbench.serving.repository import model_name

    return model_name(variant.manifest)


def _limits(spec: ExperimentSpec) -> Limits:
    """The step verdict's limits: the sample floor follows the SLO's percentile."""
    from accelbench.loadtests.verdict import Limits

    return Limits(judged_percentile=float(spec.slo.percentile), retries=spec.load.retries)


def _sweeps(
    server: LocalTriton | RemoteTriton,
    todo: list[tuple[_Variant, LoadProfile]],
    out: Path,
    repo_dir: Path | None,
    progress: Progress,
    command: str,
    limits: Limits,
    prompts: str | None = None,
    sink: StepSink | None = None,
    cancel: Cancel | None = None,
    trace: str | None = None,
) -> None:
    from accelbench.loadtests.api import measure
    from accelbench.loadtests.sweep import SweepOptions
    from accelbench.models.cards import card_from_dict

    def on_event(event: Event) -> None:
        progress.event(event)
        if sink is not None and isinstance(event, StepFinished):
            sink.step(event)

    for v, profile in todo:
        if cancel is not None and cancel.requested:
            return
        name = _triton_name(v)
        config = repo_dir / name / "config.pbtxt" if repo_dir else None
        run = f" run {profile.repeat}" if profile.repeat > 1 else ""
        with progress.step("load", f"{v.name}{run}") as notes:
            repository_config = config.read_text() if config and config.is_file() else ""
            options = SweepOptions(
                out_dir=out / "results",
                manifest=v.manifest,
                repository_config=repository_config,
                command=command,
                limits=limits,
                on_event=on_event,
                cancel=cancel,
            )
            if profile.workload:  # a generative variant: streamed, token by token (docs/llm.md)
                doc = _generative_sweep(server, v, name, profile, options, prompts, trace)
                if _served_by_vllm(v):
                    _record_engine(doc, _result_path(out, v, profile), v, server)
            else:
                doc, _ = measure(
                    server,
                    model=name,
                    profile=profile,
                    options=options,
                    card=card_from_dict(v.manifest.card, f"{v.dir}/manifest.json"),
                )
            notes.append(f"{len(doc.steps)} steps" + ("" if doc.complete else ", stopped on request"))
        if sink is not None and doc.complete:
            sink.result(_result_path(out, v, profile), doc, v.manifest)


def _record_engine(doc: ResultDocument, path: Path, v: _Variant, server: Any) -> None:
    """provenance.engine of a vLLM-served result: vLLM's version (this host's venv; unknown at a url)."""
    from accelbench.documents import EngineProvenance
    from accelbench.experiment.vllm_stage import variant_args
    from accelbench.loadtests import results

    version = None
    if server.__class__.__name__ == "LocalTriton":
        from accelbench.serving.install_vllm import vllm_env_version

        version = vllm_env_version()
    doc.provenance.engine = EngineProvenance(name="vllm", version=version, args=variant_args(v.manifest))
    results.save(doc, path)


def _generative_sweep(
    server: LocalTriton | RemoteTriton,
    v: _Variant,
    name: str,
    profile: LoadProfile,
    options: SweepOptions,
    prompts: str | None,
    trace: str | None = None,
) -> ResultDocument:
    from accelbench.loadtests.generative import generative_loadtest
    from accelbench.loadtests.sweep import Server

    where = Server(
        http_url=server.http_url,
        grpc_url=server.grpc_url,
        metrics_url=server.metrics_url,
        version=server.server_version or "",
    )
    doc, _ = generative_loadtest(
        url=where.http_url,
        model=name,
        profile=profile,
        options=options,
        prompts_file=prompts,
        trace_file=trace,
        server=where,
        context_length=(v.manifest.card.get("generative") or {}).get("context_length"),
    )
    return doc


# ---- report -------------------------------------------------------------------------------------------


def report_options(spec: ExperimentSpec) -> ReportOptions:
    """The report options a spec asks for (SLO, baseline, prices, projections): the run's report and the
    service's campaign report use the same."""
    from accelbench.reports.options import ReportOptions

    pct = spec.slo.percentile
    options = ReportOptions(
        slo_ms=float(spec.slo.latency_ms),
        percentile=f"p{int(pct) if float(pct).is_integer() else pct}",
        baseline=spec.baseline,
        price_basis=spec.price.basis,
        price_overrides=dict(spec.price.overrides),
        project=tuple(t.id for t in spec.projected_targets),
        amortization_years=spec.price.amortization_years,
    )
    if spec.price.usd_per_kwh is not None:  # else the report's own default
        options = replace(options, usd_per_kwh=spec.price.usd_per_kwh)
    return options


def _report(
    spec: ExperimentSpec, out: Path, catalog: Catalog, progress: Progress, outcome: RunOutcome
) -> None:
    from accelbench.reports.report import make_report

    results_dir = out / "results"
    options = report_options(spec)
    files = sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []
    if not files:
        raise BadInputError(f"{results_dir}: no result documents to report on (no target was measured)")
    inputs_hash = sha256_json(
        {
            "results": {p.name: sha256_file(p) for p in files},
            "options": repr(options),
            "catalog": repr(sorted(catalog.targets)),
            "accelbench": __version__,
        }
    )
    stamp = out / "report" / ".inputs.sha256"
    if stamp.is_file() and stamp.read_text().strip() == inputs_hash and outcome.report_path.is_file():
        progress.skip("report", str(outcome.report_path), "results and options unchanged")
        return
    with progress.step("report", str(out / "report")) as notes:
        made = make_report([str(results_dir)], catalog, options, out / "report")
        notes.append(f"{len(made.table)} rows")
    stamp.write_text(inputs_hash + "\n")
