"""The fixed term t0 of batch latency t(b) = t0 + b·t1, as a chip factor times a graph factor.

A series is one graph and precision published on one target at several batches; its t0 is the intercept of
b ÷ inf/s through its two smallest batches (where the line holds: at the largest a table often stops gaining).
What t0 is made of — a kernel launch per op, clocks, the host round trip — is the chip's cost per op times the
graph's number of ops in sequence, so ``log t0 = log τ(chip) + log d(graph)``, fitted by alternating means over
every series of a toolchain. A graph published on one chip then carries its t0 to another chip through the
chips' ratio (the A100's and the L4's ResNet-50 give τ(L4) ÷ τ(A100), which moves the A100's BERT t0 to the L40S).
A graph never published (a user's model) is placed by its depth (``graph_cost``: the longest chain of ops that
launch work), ``log d = log depth + c`` with c the mean of ``log d − log depth`` over the published graphs of its
kind (over every graph where its kind has none); a graph of unknown depth (a manifest older than the count)
takes the median d of the published graphs of its kind. Depth rather than op count, and rather than the
median, is what leaving each published graph out of c says (``leave_one_graph_out``, docs/projections.md).

Pure functions over plain numbers.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

Key = tuple[str, str, str, str]  # (chip, target, graph, precision): a series is one target's


def series_t0(rows: Iterable[tuple[str, str, str, str, int, float]]) -> dict[Key, float]:
    """(chip, target, graph, precision, batch, seconds per batch) rows → each series' t0 (≥ 2 batches)."""
    series: dict[Key, dict[int, float]] = {}
    for chip, target, graph, precision, batch, seconds in rows:
        series.setdefault((chip, target, graph, precision), {})[batch] = seconds
    out = {}
    for key, pts in series.items():
        if len(pts) < 2:
            continue
        (b1, t1), (b2, t2) = sorted(pts.items())[:2]
        out[key] = min(max(t1 - (t2 - t1) / (b2 - b1) * b1, 0.0), t1)
    return out


@dataclass(frozen=True)
class FixedTerms:
    chip: dict[str, float]  # log τ per chip
    graph: dict[str, float]  # log d per graph (geometric mean 1 over the graphs)
    n_series: int
    depth: Mapping[str, float] = field(default_factory=dict)  # published graphs' depths, where counted

    def at(
        self, chip: str, graphs: Sequence[str], kind_graphs: Sequence[str], depth: float | None = None
    ) -> float | None:
        """t0 on ``chip`` (else the median chip) of the graph ``placed`` names; None without any series."""
        if not self.graph:
            return None
        tau = self.chip.get(chip, statistics.median(self.chip.values()))
        return math.exp(tau + self.placed(graphs, kind_graphs, depth)[0])

    def placed(
        self, graphs: Sequence[str], kind_graphs: Sequence[str], depth: float | None = None
    ) -> tuple[float, str, list[str]]:
        """(log d, how, from which graphs): the first of ``graphs`` that was published ("published"); else a
        graph of ``depth`` ("depth": log depth + the mean log d ÷ depth of ``kind_graphs``, else of every graph,
        with a depth); else ("median") the median d of ``kind_graphs``, else of every graph."""
        known = [g for g in graphs if g in self.graph]
        if known:
            return self.graph[known[0]], "published", known[:1]
        kind = [g for g in kind_graphs if g in self.graph] or list(self.graph)
        if depth is not None:
            sized = [g for g in kind if self.depth.get(g)] or [g for g in self.graph if self.depth.get(g)]
            if sized:
                c = statistics.fmean(self.graph[g] - math.log(self.depth[g]) for g in sized)
                # a graph that launches nothing (an identity) still costs one launch
                return math.log(max(depth, 1.0)) + c, "depth", sized
        return statistics.median(self.graph[g] for g in kind), "median", kind


@dataclass(frozen=True)
class GraphResidual:
    """One published graph's d against what ``FixedTerms.placed`` gives it with the graph left out."""

    graph: str
    kind: str
    size: float  # its depth (or op count: the check is run with either)
    d: float  # fitted on its series
    by_size: float  # predicted ÷ fitted, scaled by its size from the others
    by_median: float  # predicted ÷ fitted, the median of the others


def leave_one_graph_out(
    terms: FixedTerms, sizes: Mapping[str, float], kinds: Mapping[str, str]
) -> list[GraphResidual]:
    """Each published graph with a size placed from the other graphs (``placed`` as a user's graph is) and
    by their median, against its own fitted d; graphs without a size are left out."""
    rows = []
    for g in sorted(g for g in terms.graph if sizes.get(g)):
        others = replace(
            terms,
            graph={h: v for h, v in terms.graph.items() if h != g},
            depth={h: v for h, v in sizes.items() if h != g},
        )
        if not others.graph:
            continue
        kind = [h for h in others.graph if kinds.get(h) == kinds.get(g)]
        by_size = math.exp(others.placed([], kind, sizes[g])[0] - terms.graph[g])
        by_median = math.exp(others.placed([], kind)[0] - terms.graph[g])
        rows.append(
            GraphResidual(g, kinds.get(g, ""), sizes[g], math.exp(terms.graph[g]), by_size, by_median)
        )
    return rows


def factor(t0s: dict[Key, float], rounds: int = 30) -> FixedTerms:
    """``log t0 = τ(chip) + d(graph)`` by alternating means over the series (zero t0s left out)."""
    return _factor(tuple(sorted(t0s.items())), rounds)


@functools.lru_cache(maxsize=4096)
def _factor(items: tuple[tuple[Key, float], ...], rounds: int) -> FixedTerms:
    # the validation refits the same pools many times over: the same series give the same factors
    logs = [(c, g, math.log(t)) for (c, _, g, _), t in items if t > 0]
    by_chip: dict[str, list[tuple[str, float]]] = {}
    by_graph: dict[str, list[tuple[str, float]]] = {}
    for c, g, y in logs:
        by_chip.setdefault(c, []).append((g, y))
        by_graph.setdefault(g, []).append((c, y))
    tau = dict.fromkeys(by_chip, 0.0)
    d = dict.fromkeys(by_graph, 0.0)
    for _ in range(rounds):
        tau = {c: sum(y - d[g] for g, y in rows) / len(rows) for c, rows in by_chip.items()}
        d = {g: sum(y - tau[c] for c, y in rows) / len(rows) for g, rows in by_graph.items()}
        shift = sum(d.values()) / len(d) if d else 0.0
        d = {g: v - shift for g, v in d.items()}
        tau = {c: v + shift for c, v in tau.items()}
    return FixedTerms(tau, d, len(logs))
