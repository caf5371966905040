"""accelbench: which accelerator serves my model cheapest at my latency target?

The pipeline, one sub-package per stage, imports flowing one way:
hardware ← models ← serving ← loadtests ← reports ← cli (see docs/architecture.md).
"""

__version__ = "0.1.0"
