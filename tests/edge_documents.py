"""The result documents of a few small sweeps, reduced to what must not change when the load-test process
edge is refactored: every key (at every depth) and the deterministic values (identity, load profile, the
steps' plans), with measured values, times and hosts replaced by a placeholder.

``python tests/edge_documents.py RECORD_DIR`` wrote ``tests/data/edge/*.json`` from the code before the typed
child configuration (issue 38); tests/test_loadtests_edge.py sweeps again and compares. The two generative
recordings were written again after issue 39's new step fields (TTFO, TTST, reasoning tokens, the output
count's source, whether lengths were forced and honoured): additions only, nothing else changed. The batch
sizes in Triton's per-batch statistics are measured (a loaded host forms larger dynamic batches), so those
maps are masked whole (``MEASURED_KEYS``), in the recordings too; the generative recordings gained the
engine's /metrics per step (``generative.engine_metrics``, additions only), then issue 49's (the bursts
counted, whether the step was streamed, the kernel's chunk times, the scrape's cost: additions only).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from accelbench.documents import to_dict
from accelbench.loadtests.profiles import LoadProfile, Workload
from accelbench.loadtests.verdict import Limits

DATA = Path(__file__).parent / "data" / "edge"
MODEL = "identity__cpu-local__fp32"
LIMITS = Limits(retries=0)  # a retried step carries its earlier attempts: structure that depends on noise
# values kept as they are: the document's identity, its load profile and each step's plan
KEPT = {
    "schema", "origin", "model", "variant", "target", "precision", "batch_size", "run_id", "complete",
    "load_profile", "graph_cost", "accuracy", "steps.index", "steps.offered", "steps.latency_from",
    "steps.loadgen.processes",
}  # fmt: skip
PER_ELEMENT = {"steps"}  # lists whose length is deterministic (one element per planned step)
# maps whose keys are measured: the batch sizes Triton's dynamic batcher happened to form (a loaded host
# forms larger ones)
MEASURED_KEYS = {"steps.server_stats.batch_histogram", "steps.server_stats.compute_infer_us_by_batch"}

CLASSIC = {
    "closed-http": LoadProfile(kind="closed", levels=(1, 2), duration_s=1.0, warmup_s=0.3, max_duration_s=3.0),
    "open-http-2p": LoadProfile(kind="open", levels=(100.0,), duration_s=1.0, warmup_s=0.3, max_duration_s=3.0,
                                processes=2),
    "closed-grpc-b2": LoadProfile(kind="closed", protocol="grpc", levels=(2,), duration_s=1.0, warmup_s=0.3,
                                  max_duration_s=3.0, batch_size=2),
}  # fmt: skip
GENERATIVE = {
    "openai-chat": (
        LoadProfile(kind="closed", levels=(1, 4), duration_s=1.0, warmup_s=0.3, max_duration_s=2.0),
        Workload(api="openai-chat", isl=16, osl=8),
    ),
    "openai-completions-open": (
        LoadProfile(kind="open", levels=(20.0,), duration_s=1.0, warmup_s=0.3, max_duration_s=2.0),
        Workload(api="openai-completions", isl=16, osl=8),
    ),
}
REFERENCE_ARGS = ("--ttft-ms", "20", "--itl-ms", "5")


def shape(value: Any, path: str = "") -> Any:
    """``value`` with every leaf outside ``KEPT`` replaced by ``"."`` (a measured flag such as ``drift`` too)."""
    if path in KEPT:
        return value
    if path in MEASURED_KEYS and isinstance(value, dict):
        return "{.}"
    if isinstance(value, dict):
        return {k: shape(v, f"{path}.{k}" if path else k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        if path in PER_ELEMENT:
            return [shape(v, path) for v in value]
        dicts = [shape(v, path) for v in value if isinstance(v, (dict, list))]
        return [dicts[0]] if dicts else "[.]"  # a measured list: its element's shape, not its length
    return "."


def classic_documents(repo: Path, out: Path) -> dict[str, Any]:
    from accelbench.loadtests.api import measure
    from accelbench.serving import LocalTriton

    found = {}
    with LocalTriton(repo) as triton:
        for name, profile in CLASSIC.items():
            doc, _ = measure(triton, model=MODEL, profile=profile, card=_card(),
                             **_options(out / name))  # fmt: skip
            found[name] = shape(to_dict(doc))
    return found


def generative_documents(url: str, out: Path) -> dict[str, Any]:
    from accelbench.loadtests import generative

    found = {}
    for name, (profile, workload) in GENERATIVE.items():
        doc, _ = generative.run(model="reference", profile=profile, workload=workload, out_dir=out / name,
                                url=url, limits=LIMITS)  # fmt: skip
        found[name] = shape(to_dict(doc))
    return found


def _options(out: Path) -> dict[str, Any]:
    """The sweep's options, as the code of the day takes them (keywords before issue 38, SweepOptions after)."""
    try:
        from accelbench.loadtests.sweep import SweepOptions
    except ImportError:
        return {"out_dir": out, "limits": LIMITS}
    return {"options": SweepOptions(out, limits=LIMITS)}


def _card():
    from accelbench.models.cards import load_card

    return load_card("builtin:identity")


def record(work: Path) -> None:
    import subprocess

    from accelbench.loadtests import reference_server
    from accelbench.serving.repository import write_repository
    from accelbench.serving.server import free_port

    variants, repo = work / "variants", work / "repo"
    subprocess.run([sys.executable, "-m", "accelbench.cli", "quantize", "builtin:identity", "--target",
                    "cpu-local", "--precision", "fp32", "--out", str(variants)], check=True, capture_output=True)  # fmt: skip
    write_repository([variants / MODEL], repo, "local")
    docs = classic_documents(repo, work / "out")
    with reference_server.running(free_port(), *REFERENCE_ARGS) as url:
        docs.update(generative_documents(url, work / "out"))
    DATA.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        (DATA / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record(Path(sys.argv[1]))
