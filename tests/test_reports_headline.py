"""The headline's sentence: what matters most about one line, for each kind of answer (reports/headline.py)."""

from __future__ import annotations

import pytest

from accelbench.reports.headline import Line, Pick, cost_text


def _pick(status: str, cost: float, low: float | None, high: float | None, owned: bool = False) -> Pick:
    return Pick("t", "int8", status, owned, cost, low, high, 0.5)


@pytest.mark.parametrize(
    ("best", "measured", "says", "cost"),
    [
        (_pick("projected", 1.0, 0.5, 2.0, owned=True), _pick("measured", 3.0, 2.9, 3.1),
         "t (owned) is projected, range 4× wide: measure it before buying; the cheapest measured, t, costs 3× more.",
         "$1 (proj, range $0.5–$2)"),
        (_pick("projected", 1.0, None, None), None,
         "t is projected, no range: measure it before buying; no measured target meets it.", "$1 (proj, no range)"),
        (_pick("measured", 2.0, 1.9, 2.1), None, "t is measured, ±5% (95 %).", "$2 [$1.9, $2.1]"),
        (_pick("measured", 2.0, 1.0, 4.0), None,
         "t is measured, but its interval is 4× wide: measure longer before deciding.", "$2 [$1, $4]"),
        (_pick("measured", 2.0, None, None), None,
         "t is measured, with no 95 % interval recorded: its uncertainty is unknown.", "$2"),
    ],
)  # fmt: skip
def test_the_sentence_and_the_cost_cell(best, measured, says, cost):
    line = Line("m", "requests at p99 ≤ 100 ms", best, measured)
    assert line.sentence == f"m: {says}"
    assert cost_text(best) == cost


def test_no_target_meets_the_objective():
    assert Line("m", "x", None, None).sentence.startswith("m: no priced target meets the objective")
