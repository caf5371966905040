"""The fast tier's guard: a test not marked ``slow`` may not start a server, a database or Locust.

``tests/conftest.py`` loads this module and, around the set-up and the call of every test not marked ``slow``,
turns the guard on: ``subprocess.Popen`` refuses to start tritonserver, PostgreSQL (initdb, pg_ctl,
postgres), Locust (the sweep's runner child, ``locust``), the results server (``accelbench server``, uvicorn)
or the reference/SSE test servers, and the refusal is also written to a log file that the conftest reads, so
a test that catches the error still fails. The same module is this folder's ``sitecustomize``: the conftest
puts the folder on ``PYTHONPATH`` while the guard is on, so every Python child of the test (``accelbench run``,
``accelbench serve``) carries the guard too and its tritonserver or Locust child is refused the same way.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence

LOG_ENV = "ACCELBENCH_FAST_GUARD_LOG"  # set while the guard is on: the file refusals are appended to
TEST_ENV = "ACCELBENCH_FAST_GUARD_TEST"  # the test's node id, for the message

PROGRAMS = {
    "tritonserver": "tritonserver",
    "initdb": "PostgreSQL",
    "pg_ctl": "PostgreSQL",
    "postgres": "PostgreSQL",
    "locust": "Locust",
    "uvicorn": "uvicorn",
}
MODULES = {
    "accelbench.loadtests.runner": "Locust (the sweep's runner child)",
    "accelbench.loadtests.reference_server": "the reference OpenAI server",
    "locust": "Locust",
    "uvicorn": "uvicorn",
}
SCRIPTS = {"openai_sse_server.py": "the SSE test server"}
COMMANDS = {"server": "the results server (accelbench server)"}  # accelbench sub-commands that serve
WRAPPERS = {"runuser", "sudo", "env", "timeout", "nice", "setsid", "stdbuf", "exec", "nohup"}


class SlowProcessRefused(RuntimeError):
    """A test not marked slow tried to start a server, a database or Locust."""


def offence(args: str | bytes | os.PathLike | Sequence) -> str | None:
    """What ``args`` would start that the fast tier forbids, or None."""
    if isinstance(args, (str, bytes, os.PathLike)):
        argv = shlex.split(os.fsdecode(args))
    else:
        argv = [os.fsdecode(a) for a in args]
    return _offence(argv)


def _offence(argv: list[str]) -> str | None:
    if not argv:
        return None
    prog = os.path.basename(argv[0])
    if prog in PROGRAMS:
        return PROGRAMS[prog]
    if prog in ("sh", "bash") and "-c" in argv[:-1]:  # sh -c "cmd ...": the command's words
        return _offence(shlex.split(argv[argv.index("-c") + 1]))
    if prog in WRAPPERS:  # runuser -u postgres -- initdb, timeout 60 tritonserver, exec locust: what it runs
        if "--" in argv:
            return _offence(argv[argv.index("--") + 1 :])
        return next(filter(None, (_offence(argv[i:]) for i in range(1, len(argv)))), None)
    if prog.startswith("python"):
        return _python(argv[1:])
    if prog == "accelbench":
        return _accelbench(argv[1:])
    return None


def _python(args: list[str]) -> str | None:
    if "-m" in args:
        module = args[args.index("-m") + 1] if args.index("-m") + 1 < len(args) else ""
        if module in MODULES:
            return MODULES[module]
        return _accelbench(args[args.index("-m") + 2 :]) if module == "accelbench.cli" else None
    script = next((a for a in args if not a.startswith("-")), "")
    return SCRIPTS.get(os.path.basename(script))


def _accelbench(args: list[str]) -> str | None:
    command = next((a for a in args if not a.startswith("-")), "")
    return COMMANDS.get(command)


_original = subprocess.Popen._execute_child  # type: ignore[attr-defined]
_log_path: str | None = None


def _guarded(self, args, *rest, **kw):
    what = offence(args) if _log_path else None
    if what:
        test = os.environ.get(TEST_ENV, "?")
        words = [args] if isinstance(args, (str, bytes, os.PathLike)) else args
        line = f"{test} started {what} ({shlex.join(map(os.fsdecode, words))[:200]})"
        with contextlib.suppress(OSError), open(_log_path, "a", encoding="utf-8") as log:
            log.write(line + "\n")  # the conftest fails the test from the log, even if the error is caught
        raise SlowProcessRefused(f"fast tier: {line}, but the test is not marked slow")
    return _original(self, args, *rest, **kw)


def turn_on(log_path: str) -> None:
    """Refuse forbidden children in this process and record each refusal in ``log_path``."""
    global _log_path
    _log_path = log_path
    subprocess.Popen._execute_child = _guarded  # type: ignore[attr-defined]


def turn_off() -> None:
    global _log_path
    _log_path = None


def _chain() -> None:
    """Run the ``sitecustomize`` this one hides (Debian and Ubuntu ship one), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if __name__ == "sitecustomize":
    if os.environ.get(LOG_ENV):
        turn_on(os.environ[LOG_ENV])
    _chain()
