"""``accelbench loadtest`` as a library call: find the server and the model's inputs, then sweep."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from accelbench.documents import ResultDocument, VariantManifest, to_dict
from accelbench.errors import BadInputError, ServerError
from accelbench.loadtests import sweep
from accelbench.loadtests.distributed import MasterBind, check_reachable_target
from accelbench.loadtests.events import Event, RepeatStarted
from accelbench.loadtests.jsonwire import OutputSpec
from accelbench.loadtests.profiles import LoadProfile
from accelbench.loadtests.served import DATA_MODES, ServedModel, make_payloads, parse_shapes, read_served
from accelbench.loadtests.sweep import PAYLOAD_COUNT, Server, SweepOptions
from accelbench.loadtests.verdict import DEFAULT_LIMITS, Limits
from accelbench.models.cards import ModelCard, card_from_dict, load_card
from accelbench.models.inputs import make_inputs
from accelbench.models.manifest import MANIFEST_FILE, read_manifest
from accelbench.serving import LocalTriton, RemoteTriton
from accelbench.serving.http_client import TritonHttp


def manifest_folder(
    model: str, manifest_path: str | os.PathLike[str] | None, repo: str | os.PathLike[str] | None
) -> Path | None:
    """The folder of the variant manifest: ``--manifest`` (folder or file), else the repository's model folder
    (or its version 1) when it keeps one."""
    if manifest_path is not None:
        path = Path(manifest_path)
        return path.parent if path.name == MANIFEST_FILE and not path.is_dir() else path
    if repo is not None:
        for candidate in (Path(repo) / model, Path(repo) / model / "1"):
            if (candidate / MANIFEST_FILE).is_file():
                return candidate
    return None


def find_manifest(
    model: str, manifest_path: str | os.PathLike[str] | None, repo: str | os.PathLike[str] | None
) -> VariantManifest | None:
    """The variant manifest: ``--manifest`` (folder or file), else one kept beside the repository's model."""
    folder = manifest_folder(model, manifest_path, repo)
    return read_manifest(folder) if folder is not None else None


def model_card(manifest: VariantManifest | None, card_uri: str | None) -> ModelCard | None:
    """The card that generates request payloads: ``--card`` wins, else the manifest's own card, else None
    (payloads then come from the server's model metadata, see served.py)."""
    if card_uri:
        return load_card(card_uri)
    if manifest and manifest.card:
        return card_from_dict(manifest.card, origin="manifest card")
    return None


def expected_outputs(
    manifest: VariantManifest | None, card: ModelCard | None, served: Callable[[], ServedModel]
) -> list[OutputSpec]:
    """Outputs every answer must carry (name, numpy dtype, shape): manifest, card, else the server's metadata
    (``served()`` reads it)."""
    batched = {"batched": False} if card is not None and not card.batchable else {}
    if manifest and manifest.outputs:
        return [{**to_dict(o), **batched} for o in manifest.outputs]
    if card is not None and card.outputs:
        return [{**o.to_dict(), **batched} for o in card.outputs]
    return served().expected_outputs()


def _payloads(
    card: ModelCard | None, served: Callable[[], ServedModel], profile: LoadProfile
) -> list[dict[str, np.ndarray]]:
    """From the card's generator, or (no card, or --input-data / --shape given) from the served model."""
    if card is not None and profile.input_data is None and not profile.shapes:
        payloads = make_inputs(card, profile.batch_size, PAYLOAD_COUNT, profile.seed)
        if card.batchable:
            return payloads
        # max_batch_size 0: Triton takes a scalar as dims [1] (config.pbtxt reshapes it to the graph's [])
        return [{k: v.reshape(1) if v.ndim == 0 else v for k, v in p.items()} for p in payloads]
    return make_payloads(
        served(),
        profile.batch_size,
        PAYLOAD_COUNT,
        profile.seed,
        profile.input_data or "random",
        parse_shapes(profile.shapes),
    )


def loadtest(
    *,
    model: str,
    profile: LoadProfile,
    out_dir: str | os.PathLike[str],
    repo: str | os.PathLike[str] | None = None,
    url: str | None = None,
    grpc_url: str | None = None,
    manifest_path: str | os.PathLike[str] | None = None,
    card_uri: str | None = None,
    tritonserver: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    command: str = "",
    on_event: Callable[[Event], None] | None = None,
    master_bind: MasterBind | None = None,
    server_log: str | os.PathLike[str] | None = None,
    repeats: int = 1,
    target: str | None = None,
    precision: str | None = None,
) -> tuple[ResultDocument, Path]:
    """Start a local Triton on ``repo`` (or use the one at ``url``) and sweep ``profile`` against ``model``.

    ``repeats`` N > 1: N complete sweeps on the same server, one result document each (repeat 1 under the
    usual name, repeats 2..N with ``__r2``...); each resumes on its own. Returns the last one.
    With ``master_bind`` the load comes from workers started by ``accelbench loadtest-worker``.
    ``target`` and ``precision`` (together) say what a model without a manifest runs on and at, so that its
    results can be priced; with a manifest they must agree with it."""
    import dataclasses

    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise BadInputError(f"--repeats must be a whole number >= 1, got {repeats!r}")
    server_cm = triton_server(repo, url, grpc_url, tritonserver, server_log)
    if profile.input_data not in (None, *DATA_MODES) and not Path(profile.input_data).is_file():
        raise BadInputError(f"--input-data {profile.input_data}: no such file (or use zero / random)")
    manifest = find_manifest(model, manifest_path, repo)
    _check_where(manifest, target, precision)
    card = model_card(manifest, card_uri)
    options = SweepOptions(
        out_dir=out_dir,
        manifest=manifest,
        repository_config=_repository_config(repo, model),
        command=command,
        limits=limits,
        on_event=on_event,
        master_bind=master_bind,
        target=target,
        precision=precision,
    )
    with server_cm as triton:
        triton.check_model(model, manifest)  # a served config that differs from the variant stops here
        if not TritonHttp(triton.http_url).model_ready(model):
            raise ServerError(f"model {model!r} is not loaded on {triton.http_url}")
        for repeat in range(1, repeats + 1):
            if on_event is not None and repeats > 1:
                on_event(RepeatStarted(repeat, repeats))
            found = measure(
                triton,
                model=model,
                profile=dataclasses.replace(profile, repeat=repeat),
                options=options,
                card=card,
            )
        return found


def triton_server(
    repo: str | os.PathLike[str] | None,
    url: str | None,
    grpc_url: str | None = None,
    tritonserver: str | None = None,
    server_log: str | os.PathLike[str] | None = None,
) -> LocalTriton | RemoteTriton:
    """A local Triton to start on ``repo``, or the running one at ``url``: exactly one of the two is given."""
    if repo is not None and url is None:
        return LocalTriton(repo, tritonserver=tritonserver, log_path=server_log)
    if url is not None and repo is None:
        return RemoteTriton(url, grpc_url)
    raise BadInputError("give a model repository or --url, not both and not neither")


def _check_where(manifest: VariantManifest | None, target: str | None, precision: str | None) -> None:
    """--target and --precision come together, and never contradict the variant's manifest."""
    if (target is None) != (precision is None):
        raise BadInputError("--target and --precision go together (what the served model runs on, and at)")
    for name, given in (("target", target), ("precision", precision)):
        recorded = getattr(manifest, name) if manifest else None
        if given is not None and recorded and recorded != given:
            raise BadInputError(f"--{name} {given} differs from the variant manifest's {name} {recorded}")


def measure(
    triton: LocalTriton | RemoteTriton,
    *,
    model: str,
    profile: LoadProfile,
    options: SweepOptions,
    card: ModelCard | None = None,
) -> tuple[ResultDocument, Path]:
    """One sweep of ``model`` on a running ``triton`` (LocalTriton or RemoteTriton): payloads, expected
    outputs, then :func:`sweep.run_sweep` with its resume (``options``: where, what to record, limits,
    events, workers elsewhere, cancel). ``accelbench loadtest`` and ``accelbench run``
    both measure through here. Without a card (a model accelbench did not build), or with the profile's
    ``input_data`` (zero, random or a perf_analyzer JSON file) or ``shapes`` (``NAME:D1,D2``), payloads come
    from the server's model metadata and config."""
    import functools

    server = Server(
        http_url=triton.http_url,
        grpc_url=triton.grpc_url,
        metrics_url=triton.metrics_url,
        version=getattr(triton, "server_version", None) or "",
    )
    if options.master_bind is not None:
        check_reachable_target(options.master_bind, server.client_url(profile.protocol))
    served = functools.cache(lambda: read_served(server.http_url, model))
    payloads = _payloads(card, served, profile)
    manifest = options.manifest
    return sweep.run_sweep(  # through the module: tests interrupt a run by replacing run_sweep
        server=server,
        model=model,
        variant=manifest.name if manifest else model,
        payloads=payloads,
        expected_outputs=expected_outputs(manifest, card, served),
        profile=profile,
        options=options,
    )


def _repository_config(repo: str | os.PathLike[str] | None, model: str) -> str:
    if repo is None:
        return ""
    path = Path(repo) / model / "config.pbtxt"
    return path.read_text() if path.is_file() else ""
