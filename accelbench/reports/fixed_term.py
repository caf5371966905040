"""The fixed term t0 of batch latency t(b) = t0 + b·t1, as a chip factor times a graph factor.

A series is one graph and precision published on one target at several batches; its t0 is the intercept of
b ÷ inf/s through its two smallest batches (where the line holds: at the largest a table often stops gaining).
What t0 is made of — a kernel launch per op, clocks, the host round trip — is the chip's cost per op times the
graph's number of ops in sequence, so ``log t0 = log τ(chip) + log d(graph)``, fitted by alternating means over
every series of a toolchain. A graph published on one chip then carries its t0 to another chip through the
chips' ratio (the A100's and the L4's ResNet-50 give τ(L4) ÷ τ(A100), which moves the A100's BERT t0 to the L40S).
A graph never published (a user's model) takes the median d of the published graphs of its kind: the op count
and depth that would place it are not in ``graph_cost`` yet.

Pure functions over plain numbers.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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

    def at(self, chip: str, graphs: Sequence[str], kind_graphs: Sequence[str]) -> float | None:
        """t0 of the first of ``graphs`` that was published (else the median of ``kind_graphs``' d, else of
        every graph's) on ``chip`` (else the median chip); None without any series."""
        if not self.graph:
            return None
        known = [self.graph[g] for g in graphs if g in self.graph]
        kind = [self.graph[g] for g in kind_graphs if g in self.graph]
        d = known[0] if known else statistics.median(kind or list(self.graph.values()))
        tau = self.chip.get(chip, statistics.median(self.chip.values()))
        return math.exp(tau + d)


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
