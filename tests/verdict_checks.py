"""What a load step's verdict must be, checked from the step itself (shared by the live load-test files)."""

from __future__ import annotations

HEALTH = ("drift: ", "no steady state", "load generator saturated")  # what a shared machine may cause


def check_verdict(step: dict) -> None:
    """The verdict is exactly what the rules give on the step's recorded statistics. On this healthy server
    nothing is ever an error or an abort; on a shared 2-core machine other jobs can genuinely make a step
    drift, and then it must say so with the size the statistics recorded."""
    reasons, stats = step["reasons"], step["statistics"]
    drifted = [k for k in ("latency", "throughput") if stats["drift"][k]["drift"]]
    assert sorted(r.split()[2] for r in reasons if r.startswith("drift: ")) == sorted(drifted), reasons
    invalid = [r for r in reasons if r.startswith(HEALTH)]
    assert all(r.startswith(HEALTH) or "wider than" in r or "below the 662" in r for r in reasons), reasons
    expected = "INVALID" if invalid else "LOW-PRECISION" if reasons else "VALID"
    assert step["verdict"] == expected, reasons
    if step["verdict"] == "LOW-PRECISION":
        half = (stats["throughput_rps"]["high"] - stats["throughput_rps"]["value"]) / stats["throughput_rps"][
            "value"
        ]
        assert half > 0.10 or stats["n"] < 662, (reasons, stats)
