"""``accelbench push`` (result folders → a results server) and ``PushSink`` (``accelbench run --push``).

Pushing is idempotent (the server stores a document once by content hash), so a push that was cut short is
simply run again. Nothing here ever changes or deletes a file: a server that is down loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.answers import BatchStored
from accelbench.client.http import RETRY_S, ServerClient, read_answer
from accelbench.documents import ResultDocument, VariantManifest, to_dict
from accelbench.errors import BadInputError, ServerError
from accelbench.loadtests.events import StepFinished

BATCH = 50  # documents per POST /api/v1/results/batch


def manifests_near(paths: list[str]) -> dict[str, dict[str, Any]]:
    """Variant manifests near the results, by manifest hash: in the folders given and in ../variants/."""
    found: dict[str, dict[str, Any]] = {}
    roots = {Path(p) for p in paths if Path(p).is_dir()}
    roots |= {Path(p).parent / "variants" for p in paths} | {
        Path(p).parent.parent / "variants" for p in paths
    }
    for root in sorted(r for r in roots if r.is_dir()):
        for file in sorted(root.rglob("manifest.json")):
            try:
                doc = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue  # not ours to judge here; the result is pushed without it
            if isinstance(doc, dict) and isinstance(doc.get("manifest_hash"), str):
                found.setdefault(doc["manifest_hash"], doc)
    return found


def envelope(
    doc: ResultDocument, source: str, manifest: VariantManifest | dict[str, Any] | None
) -> dict[str, Any]:
    """The body of ``POST /results``: the document, the file it came from, its variant manifest if known
    (as the pipeline hands it, or as read from a manifest.json near the results)."""
    body: dict[str, Any] = {"result": to_dict(doc), "source": source}
    if manifest is not None:
        body["variant"] = to_dict(manifest) if isinstance(manifest, VariantManifest) else dict(manifest)
    return body


def _manifest_of(doc: ResultDocument, manifests: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    return manifests.get(doc.provenance.manifest_hash or "") if doc.provenance else None


def send(client: ServerClient, body: dict[str, Any], label: str) -> bool:
    """One document; True when the server stored it as new (201), False when it had it (200)."""
    return client.request("POST", "/results", body, label=label).status == 201


def send_batch(client: ServerClient, bodies: list[dict[str, Any]], label: str) -> BatchStored | None:
    """What the server holds of one batch (counts and every id); None when it has no batch route (an older
    server)."""
    answer = client.request("POST", "/results/batch", {"results": bodies}, label=label, accept=(404, 405))
    if answer.status in (404, 405):
        return None
    return read_answer(BatchStored, answer.body, f"{client.url}/api/v1/results/batch")


@dataclass
class PushCount:
    """What a push stored, as the server answered it. ``resent``: documents of batches sent again after an
    answer was lost (stored once all the same: by content hash); the server counts those it stored at the
    first sending as already stored, so ``created`` may be short by up to ``resent`` while ``stored`` (what
    the server holds of these documents) is exact."""

    total: int
    created: int = 0
    existing: int = 0
    resent: int = 0
    stored_ids: set[str] = field(default_factory=set)

    @property
    def stored(self) -> int:
        return len(self.stored_ids) if self.stored_ids else self.created + self.existing

    def line(self, server: str) -> str:
        line = f"pushed {self.created} new, {self.existing} already stored, to {server}"
        if self.resent:
            line += (
                f" ({self.resent} sent again after an answer was lost; the server holds {self.stored} of "
                f"{self.total}, each once, and counts those its first sending stored as already stored)"
            )
        return line


def push_paths(paths: list[str], server_url: str, token: str | None, retry_s: float = RETRY_S) -> PushCount:
    """Push every result document under ``paths`` (found as ``accelbench report`` finds them: other JSON
    skipped, a malformed result document is an error); a server that does not answer is retried for
    ``retry_s`` seconds. Returns what the server holds of them (ServerError says it, when it stopped)."""
    from accelbench.reports.inputs import load_documents_with_files

    results = load_documents_with_files(paths)
    manifests = manifests_near(paths)
    count = PushCount(total=len(results))
    batched = True
    with ServerClient(server_url, token, retry_s=retry_s, scope="push") as client:
        for start in range(0, len(results), BATCH):
            chunk = results[start : start + BATCH]
            try:
                answer = None
                if batched:
                    bodies = [envelope(doc, file.name, _manifest_of(doc, manifests)) for file, doc in chunk]
                    label = f"{chunk[0][0]} … {chunk[-1][0]}" if len(chunk) > 1 else str(chunk[0][0])
                    answer = send_batch(client, bodies, label)
                    batched = answer is not None
                if answer is not None:
                    count.created, count.existing = (
                        count.created + answer.created,
                        count.existing + answer.existing,
                    )
                    count.stored_ids.update(answer.ids)
                    count.resent += len(chunk) if client.resent else 0
                    continue
                for file, doc in chunk:  # an older server: one POST per document
                    created = send(client, envelope(doc, file.name, _manifest_of(doc, manifests)), str(file))
                    count.created, count.existing = count.created + created, count.existing + (not created)
                    count.resent += client.resent
            except ServerError as err:
                maybe = (
                    f"; the answer for the next {len(chunk)} was lost: they may be stored too"
                    if client.resent
                    else ""
                )
                raise ServerError(
                    f"{err}; the server confirmed {count.created + count.existing} of {len(results)} stored"
                    f"{maybe}; the files stay on disk: run accelbench push again when it is up (what is "
                    "stored is not sent twice)"
                ) from None
    return count


class PushSink:
    """``accelbench run --push URL``, a ``StepSink``: each result goes to the server as its sweep finishes
    (and each result a rerun reuses: stored once, so sending it again costs nothing).

    A failed push never stops the run: the document is on disk already, and one line (``warn``, which the
    CLI points at stderr) says how to send it later.
    """

    def __init__(
        self, server_url: str, token: str | None, results_dir_hint: str, warn: Callable[[str], None]
    ) -> None:
        self.client = ServerClient(server_url, token, scope="push")
        self.hint, self.warn, self.failed = results_dir_hint, warn, 0

    def step(self, done: StepFinished) -> None:
        """Steps stay on disk until the sweep is done: the server keeps results, not partial documents."""

    def result(self, path: Path, document: ResultDocument, manifest: VariantManifest | None) -> None:
        try:
            send(self.client, envelope(document, Path(path).name, manifest), str(path))
        except (ServerError, BadInputError) as err:
            self.failed += 1
            if self.failed == 1:
                self.warn(
                    f"accelbench: push failed, the results stay on disk ({err}); send them later with: "
                    f"accelbench push {self.hint} --server {self.client.url}"
                )

    def close(self) -> None:
        self.client.close()
