"""The client side of the results service (httpx only): ``accelbench push`` and ``accelbench run --push``.

Pushing is idempotent (the server stores a document once by content hash), so a push that was cut short is
simply run again. Nothing here ever changes or deletes a file: a server that is down loses nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ServerError

TIMEOUT_S = 30.0


def _manifests(paths: list[str]) -> dict[str, dict[str, Any]]:
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


def envelope(doc: Any, source: str, manifests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if hasattr(doc, "model_dump"):  # a ResultDocument rather than its dict
        from accelbench.documents import to_dict

        doc = to_dict(doc)
    body: dict[str, Any] = {"result": doc, "source": source}
    manifest = manifests.get((doc.get("provenance") or {}).get("manifest_hash") or "")
    if manifest is not None:
        body["variant"] = manifest
    return body


class Pusher:
    """One HTTP client for one server; ``send`` returns True when the server stored the document as new."""

    def __init__(self, server_url: str, token: str | None) -> None:
        import httpx

        if not server_url.startswith(("http://", "https://")):
            raise BadInputError(f"--server {server_url!r}: give the server's URL, e.g. http://127.0.0.1:8080")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = server_url.rstrip("/")
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S)

    def close(self) -> None:
        self.client.close()

    def send(self, body: dict[str, Any], label: str) -> bool:
        import httpx

        try:
            response = self.client.post("/api/v1/results", json=body)
        except httpx.HTTPError as err:
            raise ServerError(
                f"results server {self.url} is not reachable ({type(err).__name__}: {err})"
            ) from None
        if response.status_code in (200, 201):
            return response.status_code == 201
        try:
            message = response.json().get("error") or response.text
        except ValueError:
            message = response.text[:200]
        if response.status_code >= 500:  # the server's trouble (e.g. its database is down): try again later
            raise ServerError(f"results server {self.url} failed ({response.status_code}): {message}")
        raise BadInputError(f"{label}: the server refused it ({response.status_code}): {message}")


BATCH = 50  # documents per POST /api/v1/results/batch


def send_batch(pusher: Pusher, bodies: list[dict[str, Any]], label: str) -> tuple[int, int] | None:
    """(created, existing) for one batch; None when the server has no batch route (an older server)."""
    import httpx

    try:
        response = pusher.client.post("/api/v1/results/batch", json={"results": bodies})
    except httpx.HTTPError as err:
        raise ServerError(
            f"results server {pusher.url} is not reachable ({type(err).__name__}: {err})"
        ) from None
    if response.status_code in (404, 405):
        return None
    if response.status_code == 200:
        answer = response.json()
        return int(answer["created"]), int(answer["existing"])
    try:
        message = response.json().get("error") or response.text
    except ValueError:
        message = response.text[:200]
    if response.status_code >= 500:
        raise ServerError(f"results server {pusher.url} failed ({response.status_code}): {message}")
    raise BadInputError(f"{label}: the server refused it ({response.status_code}): {message}")


def result_files(paths: list[str]) -> list[tuple[Path, Any]]:
    """(file, ResultDocument) for every result document under ``paths``, found as ``accelbench report``
    finds them: other JSON files (manifests, telemetry) are skipped, a malformed result document is an error."""
    from accelbench.reports.inputs import load_documents_with_files

    return load_documents_with_files(paths)


def push_paths(paths: list[str], server_url: str, token: str | None) -> dict[str, int]:
    """Push every result document under ``paths``; returns counts of new and already stored documents."""
    results = result_files(paths)
    manifests = _manifests(paths)
    pusher = Pusher(server_url, token)
    counts = {"created": 0, "existing": 0}
    batched = True
    try:
        for start in range(0, len(results), BATCH):
            chunk = results[start : start + BATCH]
            try:
                answer = None
                if batched:
                    bodies = [envelope(doc, file.name, manifests) for file, doc in chunk]
                    label = f"{chunk[0][0]} … {chunk[-1][0]}" if len(chunk) > 1 else str(chunk[0][0])
                    answer = send_batch(pusher, bodies, label)
                    batched = answer is not None
                if answer is None:  # an older server: one POST per document
                    answer = (0, 0)
                    for file, doc in chunk:
                        created = pusher.send(envelope(doc, file.name, manifests), str(file))
                        answer = (answer[0] + created, answer[1] + (not created))
            except ServerError as err:
                raise ServerError(f"{err}; {start} of {len(results)} sent, the files stay on disk: "
                                  "run accelbench push again when it is up") from None  # fmt: skip
            counts["created"] += answer[0]
            counts["existing"] += answer[1]
    finally:
        pusher.close()
    return counts


class PushSink:
    """``accelbench run --push URL``: called with each result document as its sweep finishes.

    A failed push never stops the run: the document is on disk already, and one line says how to send it
    later. ``warn`` prints that line (the CLI passes a function that writes to stderr).
    """

    def __init__(self, server_url: str, token: str | None, results_dir_hint: str, warn: Any) -> None:
        self.pusher = Pusher(server_url, token)
        self.hint = results_dir_hint
        self.warn = warn
        self.failed = 0

    def __call__(self, path: Path, doc: dict[str, Any]) -> None:
        try:
            self.pusher.send(envelope(doc, Path(path).name, _manifests([str(Path(path).parent)])), str(path))
        except (ServerError, BadInputError) as err:
            self.failed += 1
            if self.failed == 1:
                self.warn(f"accelbench: push failed, the results stay on disk ({err}); send them later with: "
                          f"accelbench push {self.hint} --server {self.pusher.url}")  # fmt: skip

    def close(self) -> None:
        self.pusher.close()
