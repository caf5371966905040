"""Progress display for `accelbench run`: one line per stage step, with a live spinner on a terminal.

Plain lines (``[stage] item: status (seconds)``) when stderr is not a TTY, so CI logs stay readable; rich on a
TTY. Progress goes to stderr so stdout carries only the answer (where the report is).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


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
    records: list[StepRecord] = field(default_factory=list)
    _console: object | None = None

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

    def _status(self, text: str):
        if self._console is not None and not self.quiet:
            from rich.markup import escape

            return self._console.status(escape(text))
        return _Null()

    def count(self, status: str, stage: str | None = None) -> int:
        return sum(1 for r in self.records if r.status == status and (stage is None or r.stage == stage))


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def make_progress(quiet: bool = False) -> Progress:
    """Rich spinner and colours on a terminal; plain lines otherwise."""
    console = None
    if not quiet and sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True)
    return Progress(quiet=quiet, _console=console)
