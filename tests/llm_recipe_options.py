"""Check a recipe script's command lines against the tools' documented options (tests/data/llm_recipes/).

Each JSON file there records one tool's options from its real source or docs (URL, commit, version inside).
``invocations`` finds every call of a tool in a bash script; ``problems`` lists what a call gets wrong: an
option the tool does not have, a value outside its choices, a required option left out, a flag given a value.
The fake tools the script tests put on PATH run the same check on the argv they receive.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "llm_recipes"
# tool -> (data file, key inside it or None, how the script calls it)
TOOLS = {
    "hf_ptq.py": ("modelopt_hf_ptq.json", None, "$HF_PTQ"),
    "trtllm-serve": ("trtllm_serve.json", None, "trtllm-serve"),
    "inference_demo": ("nxdi_inference_demo.json", None, "inference_demo"),
    "tensorrt-edgellm-quantize-llm": ("tensorrt_edgellm.json", "tensorrt-edgellm-quantize-llm", None),
    "tensorrt-edgellm-export-llm": ("tensorrt_edgellm.json", "tensorrt-edgellm-export-llm", None),
    "llm_build": ("tensorrt_edgellm.json", "llm_build", "$LLM_BUILD"),
}
_ENDS = {"&&", "||", ";", "|", ")"}
_STARTS = {"exec", "$PYTHON", "then", "do", "&&", "||", ";"}


def documented(tool: str) -> dict[str, Any]:
    """The recorded option list of ``tool``: {"options": {...}, "positional": [...], "source": url, ...}."""
    name, key, _ = TOOLS[tool]
    data = json.loads((DATA / name).read_text(encoding="utf-8"))
    return data["tools"][key] | {"version": data["version"]} if key else data


def invocations(script: str) -> list[tuple[str, list[str]]]:
    """Every (tool, argv after the tool) the script runs; ``need TOOL``, tests and comments are not calls."""
    calls = []
    for line in script.replace("\\\n", " ").splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, token in enumerate(tokens):
            tool = next((t for t, (_, _, call) in TOOLS.items() if token == (call or t)), None)
            # a call is a command's first word (or what exec / the interpreter runs), not a test's operand
            if tool is None or (i and tokens[i - 1] not in _STARTS):
                continue
            argv = []
            for arg in tokens[i + 1 :]:
                if arg in _ENDS:
                    break
                argv.append(arg)
            calls.append((tool, argv))
    return calls


def parse(argv: list[str], spec: dict[str, Any]) -> tuple[dict[str, str | None], list[str], list[str]]:
    """(option -> value, positionals, problems) for one call, reading options the way argparse/click do."""
    options, positionals, problems = {}, [], []
    known = spec["options"]
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            positionals.append(arg)
            i += 1
            continue
        name, eq, value = arg.partition("=")
        info = known.get(name)
        if info is None:
            problems.append(f"{name} is not a documented option")
            i += 1
            continue
        flag = info.get("action") in ("store_true", "store_false")
        if flag and eq:
            problems.append(f"{name} is a flag and takes no value")
        if not flag and not eq:
            value = argv[i + 1] if i + 1 < len(argv) else None
            i += 1
            if value is None or value.startswith("--"):
                problems.append(f"{name} needs a value")
        options[name] = value if not flag else None
        i += 1
    return options, positionals, problems


def problems(tool: str, argv: list[str]) -> list[str]:
    """What this call of ``tool`` gets wrong against its documented options (empty when nothing)."""
    spec = documented(tool)
    options, positionals, found = parse(argv, spec)
    for name, value in options.items():
        choices = spec["options"][name].get("choices")
        if isinstance(choices, list) and value is not None and value not in choices:
            found.append(f"{name} {value!r} is not one of {choices}")
    for name, info in spec["options"].items():
        if info.get("required") is True and name not in options and not _alias_given(spec, name, options):
            found.append(f"required option {name} is missing")
    if len(positionals) != len(spec.get("positional", [])):
        found.append(f"positional arguments {positionals} do not match {spec.get('positional', [])}")
    older = spec.get("also_in", {}).get("options")
    if older is not None:
        found += [f"{name} is not in the older release's options" for name in options if name not in older]
    return found


def _alias_given(spec: dict[str, Any], name: str, options: dict[str, Any]) -> bool:
    # hf_ptq.py: --pyt_ckpt_path and --model are one argument (both marked required in the recorded list)
    aliases = {"--pyt_ckpt_path": "--model", "--model": "--pyt_ckpt_path"}
    return aliases.get(name) in options
