"""The load test's result document (``ResultDocument``, accelbench/documents.py): build, resume, write.

The file is rewritten atomically after every step, so an interrupted run keeps what it finished. A rerun
with the same ``provenance.manifest_hash`` and ``load_profile`` continues after the finished steps; a step
that was cut short (``"aborted"``) is measured again.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from accelbench.documents import (
    RESULT_SCHEMA,
    Accuracy,
    Provenance,
    ResultDocument,
    ServerInfo,
    Step,
    VariantManifest,
    dump_json,
    load_result,
    to_dict,
)
from accelbench.errors import BadInputError
from accelbench.loadtests.jsonwire import ProvenanceWire
from accelbench.loadtests.profiles import LoadProfile
from accelbench.util import atomic_write_text, utc_now_iso

SCHEMA = RESULT_SCHEMA
_PACKAGES = ("accelbench", "locust", "tritonclient", "hdrhistogram", "gevent", "grpcio", "numpy", "psutil")


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def host_probe() -> ProvenanceWire:
    """What the load generator ran on (the accelerator is described by the server side and the catalog)."""
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def run_id(variant: str, profile_label: str, repeat: int = 1) -> str:
    """Repeat 1 keeps the name it always had; repeats 2..N of ``--repeats N`` end in ``__r2`` ... ``__rN``."""
    return f"{variant}__{profile_label}" + (f"__r{repeat}" if repeat > 1 else "")


def new_document(
    *,
    model: str,
    variant: str,
    manifest: VariantManifest | None,
    profile: LoadProfile,
    server: ProvenanceWire,
    repository_config: str = "",
    command: str = "",
    target: str | None = None,
    precision: str | None = None,
) -> ResultDocument:
    """An empty document (no steps yet) with the provenance of this run; ``target`` and ``precision`` are
    used where there is no manifest (a model accelbench did not build)."""
    accuracy = manifest.accuracy if manifest else None
    return ResultDocument(
        run_id=run_id(variant, profile.label(), profile.repeat),
        origin="accelbench-loadtest",
        model=manifest.model if manifest else model,
        variant=variant,
        target=(manifest.target if manifest else None) or target,
        precision=(manifest.precision if manifest else None) or precision,
        batch_size=profile.batch_size,
        **({"task": "text-generation"} if profile.workload else {}),  # classic documents unchanged
        # the result keeps the verdict and its figure; the manifest has the rest
        accuracy=Accuracy(metric=accuracy.metric, value=accuracy.value, verdict=accuracy.verdict)
        if accuracy
        else None,
        graph_cost=manifest.graph_cost.model_copy() if manifest and manifest.graph_cost else None,
        provenance=Provenance(
            host=host_probe(),
            packages=package_versions(),
            manifest_hash=manifest.manifest_hash if manifest else "",
            repository_config=repository_config,
            server=ServerInfo.model_validate(server),
            created_at=utc_now_iso(),
            command=command,
        ),
        load_profile=profile.to_document(),
        steps=[],
        complete=False,
    )


def load_document(path: str | os.PathLike[str]) -> ResultDocument | None:
    """The document at ``path``, or None when there is none; BadInputError when it is not ours."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise BadInputError(f"{path}: not a readable result document ({err})") from None
    return load_result(data, str(path))


def resumable(doc: ResultDocument | None, manifest_hash: str, profile: LoadProfile) -> bool:
    """True when ``doc`` measured the same variant under the same load profile, from this host with these
    packages: a document's provenance is that of the process that measured its steps, so steps measured
    elsewhere (a results folder copied between hosts) are measured again, never relabelled as this host's."""
    return bool(
        doc
        and (doc.provenance.manifest_hash or "") == manifest_hash
        and to_dict(doc.load_profile) == profile.to_dict()
        and doc.provenance.host == host_probe()
        and doc.provenance.packages == package_versions()
    )


def finished_steps(doc: ResultDocument) -> list[Step]:
    """Steps that ran to their end (VALID or INVALID); a step cut short is measured again. A re-measurement
    cut short gives back the attempt before it (with its own earlier attempts), so none is lost."""
    out = []
    for last in doc.steps:
        step: Step | None = last
        while step is not None and step.aborted:
            step = _previous_attempt(step)
        if step is not None:
            out.append(step)
    return out


def _previous_attempt(step: Step) -> Step | None:
    earlier = list(step.earlier_attempts or [])
    if not earlier:
        return None
    previous = earlier.pop()
    if earlier:
        previous.earlier_attempts = earlier
    return previous


def save(doc: ResultDocument, path: str | os.PathLike[str]) -> None:
    doc.steps = sorted(doc.steps, key=lambda s: s.index)
    atomic_write_text(path, dump_json(doc))


def put_step(doc: ResultDocument, step: Step | Mapping[str, Any], path: str | os.PathLike[str]) -> Step:
    """Record ``step``, rewrite the file; the typed step. A finished step already at that index is being
    measured again (``--retries``): it is kept, with its own earlier attempts, in ``step.earlier_attempts``;
    one cut short is replaced."""
    step = step if isinstance(step, Step) else Step.model_validate(step)
    old = next((s for s in doc.steps if s.index == step.index), None)
    if old is not None and not old.aborted:
        earlier = list(old.earlier_attempts or [])
        old = old.model_copy()
        if old.earlier_attempts is not None:
            old.earlier_attempts = None
            old.__pydantic_fields_set__.discard("earlier_attempts")
        step.earlier_attempts = [*earlier, old]
        step.attempt = len(step.earlier_attempts) + 1
    doc.steps = [s for s in doc.steps if s.index != step.index] + [step]
    save(doc, path)
    return step
