"""Simulate the GPU machine's Python here: make the packages it lacks unimportable, then run a command.

    python bench/device/import_guard.py -m accelbench.cli probe --json

The GPU machine has torch, onnx, onnxruntime, numpy, click, rich, pandas, psutil, nvidia-ml-py, but not
locust, gevent, tritonclient, hdrhistogram, nvidia-pytriton or optimum: what device_check.py runs there
must not import those at module level.
"""

import runpy
import sys

MISSING = ("locust", "gevent", "tritonclient", "hdrh", "pytriton", "optimum", "geventhttpclient", "grpc")


class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: not on the GPU machine)")
        return None


sys.meta_path.insert(0, _Block())
if sys.argv[1] == "-m":
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
