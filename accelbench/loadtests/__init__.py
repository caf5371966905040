"""Load-test stage: Locust-driven sweeps against Triton with exact µs latencies (docs/loadtests.md).

Importing this package imports nothing heavy: the Locust child process (``accelbench.loadtests.runner``)
imports the package before it can monkey-patch, so the public names below load lazily. Locust and gevent
run only in that child, or under ``locust -f .../locustfile.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "loadtest": "accelbench.loadtests.api",
    "LoadProfile": "accelbench.loadtests.profiles",
    "LoadPlan": "accelbench.loadtests.profiles",
    "Workload": "accelbench.loadtests.profiles",
    "parse_levels": "accelbench.loadtests.profiles",
    "Server": "accelbench.loadtests.sweep",
    "run_sweep": "accelbench.loadtests.sweep",
    "Limits": "accelbench.loadtests.verdict",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
