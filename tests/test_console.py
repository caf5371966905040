"""What `accelbench` prints on the console: each progress message once, and --quiet / --verbose as a user expects.

The model stage reports progress as log records (models/variants.py ``progress``); the command line shows them as
``accelbench: ...`` lines (commands/console.py). onnxruntime's quantizer logs through the root logger, which
installs a root handler on its first message: before the fix every progress line then printed a second time as
``INFO:accelbench.models.variants: ...`` (9 duplicated lines in the demo). The subprocess below installs that root
handler first, as onnxruntime does, and runs a real quantize of the built-in identity model.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

# the root handler a library's logging.warning() call installs (logging.basicConfig), then the real CLI
_CLI = "import logging, sys; logging.basicConfig(); from accelbench.cli import main; main(sys.argv[1:])"


def _quantize(tmp_path, *options: str) -> subprocess.CompletedProcess[str]:
    args = [*options, "quantize", "builtin:identity", "--target", "cpu-local", "--out", str(tmp_path / "v")]
    return subprocess.run(
        [sys.executable, "-c", _CLI, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_each_progress_message_prints_once_and_quiet_hides_them(tmp_path):
    run = _quantize(tmp_path)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    progress = [line for line in lines if line.startswith("accelbench: ")]
    assert len(progress) >= 4, run.stderr  # reference outputs, each variant made and judged
    assert not [line for line in lines if line.startswith(("INFO:", "DEBUG:"))], run.stderr
    twice = [line for line, n in Counter(lines).items() if n > 1]
    assert not twice, f"printed more than once: {twice}"
    assert "identity__cpu-local__int8" in run.stdout  # the answer stays on stdout

    quiet = _quantize(tmp_path, "--quiet")  # the variants exist now: reused, and nothing said about it
    assert quiet.returncode == 0, quiet.stderr
    assert not [line for line in quiet.stderr.splitlines() if line.startswith(("accelbench: ", "INFO:"))]
    assert "identity__cpu-local__int8" in quiet.stdout


def test_quiet_and_verbose_together_is_one_clear_line():
    from click.testing import CliRunner

    from accelbench.cli import main

    result = CliRunner().invoke(main, ["--quiet", "--verbose", "targets"])
    assert result.exit_code == 2
    assert result.output.strip().startswith("accelbench: error: --quiet and --verbose contradict")
    assert len(result.output.strip().splitlines()) == 1


def test_verbose_adds_each_window_and_quiet_says_nothing(capsys):
    from accelbench.experiment.progress import make_progress
    from accelbench.loadtests.events import StepProgress

    window = StepProgress(index=0, offered={"concurrency": 4}, elapsed_s=2.0, rps=812.5, p99_us=4100.0)
    for verbose, quiet, expected in ((True, False, 1), (False, False, 0), (True, True, 0)):
        make_progress(quiet=quiet, verbose=verbose).event(window)
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == expected, (verbose, quiet, lines)
        assert all("812.5 req/s, p99 4100 µs" in line for line in lines)
