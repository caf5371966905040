"""Progress display for `accelbench run`: one line per stage step, with a live spinner on a terminal.

Plain lines (``[stage] item: status (seconds)``) when stderr is not a TTY, so CI logs stay readable; rich on a
TTY. Progress goes to stderr so stdout carries only the answer (where the report is). The load sweep's typed
events (``loadtests/events.py``) arrive through ``event``: one line per recorded step.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.loadtests.events import Event, RepeatStarted, StepFinished, StepProgress

if TYPE_CHECKING:
    from rich.console import Console

    from accelbench.documents import Step


@dataclass
class StepRecord:
    stage: str
    item: str
    status: str  # done | skipped | failed
    seconds: float
    note: str = ""


@dataclass
class Progress:
    """Records every step (the pipeline's tests read ``records``) and prints it."""

    quiet: bool = False
    verbose: bool = False  # also each measured window of a running step (accelbench -v run)
    records: list[StepRecord] = field(default_factory=list)
    _console: Console | None = None

    def _emit(self, text: str, style: str = "") -> None:
        if self.quiet:
            return
        if self._console is not None:
            self._console.print(text, style=style or None, highlight=False, markup=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def stage(self, name: str, detail: str = "") -> None:
        self._emit(f"== {name}" + (f": {detail}" if detail else ""), "bold")

    def skip(self, stage: str, item: str, why: str) -> None:
        self.records.append(StepRecord(stage, item, "skipped", 0.0, why))
        self._emit(f"[{stage}] {item}: skipped ({why})", "dim")

    def note(self, stage: str, message: str) -> None:
        self._emit(f"[{stage}] {message}", "yellow")

    def event(self, event: Event) -> None:
        """A load sweep's event: a line per recorded step and per repeat; with ``verbose`` also each measured
        window of the running step; the rest are not shown."""
        if isinstance(event, StepProgress) and self.verbose:
            self.note(
                "load",
                f"    window: {event.elapsed_s:.0f} s, {event.rps:.4g} req/s, p99 {event.p99_us:.4g} µs",
            )
        elif isinstance(event, StepFinished):
            self.note("load", step_note(event.step))
        elif isinstance(event, RepeatStarted):
            self.note("load", f"run {event.repeat} of {event.repeats}")

    @contextmanager
    def step(self, stage: str, item: str) -> Iterator[list[str]]:
        """Times a step; the caller may append a short note to the yielded list."""
        notes: list[str] = []
        started = time.monotonic()
        status_cm = self._status(f"[{stage}] {item} ...")
        try:
            with status_cm:
                yield notes
        except BaseException:
            seconds = time.monotonic() - started
            self.records.append(StepRecord(stage, item, "failed", seconds, "; ".join(notes)))
            self._emit(f"[{stage}] {item}: failed after {seconds:.1f} s", "red")
            raise
        seconds = time.monotonic() - started
        self.records.append(StepRecord(stage, item, "done", seconds, "; ".join(notes)))
        suffix = f"; {'; '.join(notes)}" if notes else ""
        self._emit(f"[{stage}] {item}: done ({seconds:.1f} s{suffix})", "green")

    def _status(self, text: str) -> AbstractContextManager[object]:
        if self._console is not None and not self.quiet:
            from rich.markup import escape

            return self._console.status(escape(text))
        return nullcontext()

    def count(self, status: str, stage: str | None = None) -> int:
        return sum(1 for r in self.records if r.status == status and (stage is None or r.stage == stage))


def step_note(step: Step) -> str:
    """One progress line per load step; an INVALID step says why, so the user can act on it."""
    from accelbench.documents import to_dict
    from accelbench.loadtests.profiles import offered_label

    p99 = step.latency_us.p99 if step.latency_us else None
    again = f" (attempt {step.attempt})" if (step.attempt or 1) > 1 else ""
    if step.generative is not None and step.generative.ttft_us is not None:  # a generative step's figures
        from accelbench.reports.formatting import num

        g = step.generative
        tok_s = g.output_tokens_per_s.value if g.output_tokens_per_s else None
        p50 = {m: (getattr(g, m).p50 if getattr(g, m) else None) for m in ("ttft_us", "itl_us", "tpot_us")}
        timing = (
            f"TTFT p50 {num(p50['ttft_us'])} µs, ITL p50 {num(p50['itl_us'])} µs, TPOT p50 {num(p50['tpot_us'])} µs"
            if g.streamed is not False
            else f"TTFT/ITL/TPOT not streamed ({g.burst_answers} of {g.requests} answers in one burst)"
        )
        text = (
            f"  {offered_label(to_dict(step.offered))}{again}: {num(tok_s)} tok/s, {timing}, {step.verdict}"
        )
        return text + (f" ({'; '.join(step.reasons)})" if step.reasons else "")
    text = (
        f"  {offered_label(to_dict(step.offered))}{again}: {step.throughput_rps} req/s, p99 {p99} µs, "
        f"{step.verdict}"
    )
    return text + (f" ({'; '.join(step.reasons)})" if step.reasons else "")


def make_progress(quiet: bool = False, verbose: bool = False) -> Progress:
    """Rich spinner and colours on a terminal; plain lines otherwise."""
    console: Console | None = None
    if not quiet and sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True)
    return Progress(quiet=quiet, verbose=verbose and not quiet, _console=console)
