"""Result documents grouped by what a report row is: one ``Group`` per model × precision × target. Pure.

Below the builders that read the groups (build.py, repeats.py, llm_report.py), so each imports it and none
imports another to reach it. A document is kept once, by the hash of its content, and the groups are ordered
by content, so the same documents in any order (from a folder or a database) group the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from accelbench.documents import Accuracy, ResultDocument, Step, to_dict

GroupKey = tuple[str, str, str]  # (model, precision, target id)


@dataclass(frozen=True)
class Result:
    """A result document and the hash of its content (tells apart two hosts' runs with the same run id)."""

    doc: ResultDocument
    sha256: str


def unique_results(documents: Iterable[ResultDocument]) -> list[Result]:
    """Each document once (by content), in a fixed order, whatever order the source gave them in."""
    by_hash: dict[str, ResultDocument] = {}
    for doc in documents:
        by_hash.setdefault(doc.content_hash(), doc)
    found = [Result(doc, sha) for sha, doc in by_hash.items()]
    return sorted(found, key=lambda r: (r.doc.model, r.doc.target or "", r.doc.run_id, r.sha256))


def group_key(doc: ResultDocument) -> GroupKey | None:
    """(model, precision, target) of a document; None when it names no target or no precision."""
    if not doc.precision or not doc.target:
        return None
    return doc.model, doc.precision, doc.target


@dataclass
class Group:
    """All result documents for one (model, precision, target)."""

    model: str
    precision: str
    target_id: str
    results: list[Result]

    @cached_property
    def _runs_per_id(self) -> Counter[str]:  # read once the group is complete (group_results fills it first)
        return Counter(r.doc.run_id for r in self.results)

    def label(self, result: Result) -> str:
        """The run id, made unique with the document's hash when two hosts wrote the same run id."""
        same = self._runs_per_id[result.doc.run_id]
        return result.doc.run_id if same == 1 else f"{result.doc.run_id}@{result.sha256[:12]}"

    def steps(self) -> list[tuple[str, Step]]:
        return [(self.label(r), s) for r in self.results for s in r.doc.steps]

    def steps_only(self) -> list[Step]:
        return [s for r in self.results for s in r.doc.steps]

    def accuracy(self) -> Accuracy | None:
        return next(
            (r.doc.accuracy for r in self.results if r.doc.accuracy and to_dict(r.doc.accuracy)), None
        )

    def graph_cost(self) -> dict[str, Any] | None:
        return next((to_dict(r.doc.graph_cost) for r in self.results if r.doc.graph_cost), None)

    def variant(self) -> str | None:
        return next((r.doc.variant for r in self.results if r.doc.variant), None)

    def batch_size(self) -> int | None:
        return next((r.doc.batch_size for r in self.results if r.doc.batch_size), None)

    def sources(self) -> str:
        """Each document as ``<run_id>@<sha256[:12]>``, ";"-separated: named by content, not by file."""
        return ";".join(f"{r.doc.run_id}@{r.sha256[:12]}" for r in self.results)


def priceable(
    results: list[Result], known_targets: Container[str] | None = None
) -> tuple[list[Result], list[str]]:
    """The results that name their target and precision (a cost needs both), and a line per one that does
    not: a load test of a model accelbench did not build records neither unless it is told. With
    ``known_targets``, a result whose target is not among them is left out too."""
    kept, left_out = [], []
    for r in results:
        missing = [name for name in ("target", "precision") if not getattr(r.doc, name)]
        if missing:
            left_out.append(
                f"{r.doc.run_id}@{r.sha256[:12]} (model {r.doc.model}): no {' or '.join(missing)}"
            )
        elif known_targets is not None and r.doc.target not in known_targets:
            left_out.append(
                f"{r.doc.run_id}@{r.sha256[:12]} (model {r.doc.model}): target {r.doc.target!r} "
                "is not in this server's catalog"
            )
        else:
            kept.append(r)
    return kept, left_out


def group_results(results: list[Result]) -> dict[GroupKey, Group]:
    """The results by (model, precision, target), in key order; a result naming no target or precision is in
    no group (``priceable`` says which)."""
    groups: dict[GroupKey, Group] = {}
    for r in results:
        key = group_key(r.doc)
        if key is not None:
            groups.setdefault(key, Group(*key, results=[])).results.append(r)
    return dict(sorted(groups.items()))
