"""Regenerate an option list in this folder from a tool's argparse source (python extract_options.py FILE).

Prints {"--option": {"choices": [...], "action": ..., "required": ...}} for every ``add_argument`` whose
arguments are literal. Used for hf_ptq.py (ModelOpt) and inference_demo.py (NxD Inference); the JSON files
here add the source URL, commit and version by hand, and the choices argparse computes at import time
(ModelOpt's preset directory listings).
"""

import ast
import json
import sys
from pathlib import Path


def options(source: str) -> dict:
    found = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
        info = {}
        for kw in node.keywords:
            if kw.arg in ("choices", "action", "required"):
                try:
                    info[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    info[kw.arg] = ast.unparse(kw.value)
        for name in names:
            found[name] = info
    return found


if __name__ == "__main__":
    print(json.dumps(options(Path(sys.argv[1]).read_text(encoding="utf-8")), indent=1, sort_keys=True))
