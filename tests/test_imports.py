"""The import graph of accelbench/ keeps the architecture (docs/architecture.md): no import circles, no stage
importing a later stage or a composition root (the service included), no root importing a root it may not,
nothing below the stages importing a stage.

Every import statement counts, wherever it is: at module level, inside a function (a local import that
hides a circle is still a circle) or under ``if TYPE_CHECKING``. The graph is read with ``ast`` from the
source, so nothing is imported and optional toolchains need not be installed.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "accelbench"

# The stages in the order data flows: a module may import its own stage and the stages before it.
STAGES = ("hardware", "models", "serving", "loadtests", "reports")
ROOT = len(STAGES)  # above the stages: the four composition roots
ROOTS = {
    "cli": "cli",
    "commands": "cli",
    "experiment": "experiment",
    "service": "service",
    "client": "client",
    "results": "results",  # the DataFrames API (accelbench.results): folders → the report's table, as the CLI
}
# The roots each root may import: the CLI any; the server and its HTTP client (push, submit, agent) the
# experiment (its spec; the agent runs the pipeline) but not each other; the experiment none (it hands
# results to a sink it is given).
ROOT_IMPORTS = {"cli": {"experiment", "service", "client"}, "service": {"experiment"}, "client": {"experiment"},
                "experiment": set(), "results": set()}  # fmt: skip
BASE = -1  # below every stage: imports nothing of accelbench but other base modules
BASE_MODULES = ("__init__", "answers", "documents", "errors", "util", "processes", "watchdog")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str  # dotted module name (a module or package of accelbench)
    where: str  # file:line of the statement

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The accelbench module or package ``name`` names, or its nearest enclosing one that exists."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name if name.startswith("accelbench") else None


def imports_of(
    name: str, path: Path, modules: dict[str, Path], root: Path = PACKAGE.parent
) -> Iterator[Import]:
    """Every accelbench module ``name`` imports, one per statement and name, with its line."""
    is_package = path.name == "__init__.py"
    where = lambda node: f"{path.relative_to(root)}:{node.lineno}"  # noqa: E731
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if target := _resolve(alias.name, modules):
                    yield Import(name, target, where(node))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package (a package's own name for its __init__)
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            else:
                base = node.module or ""
            for alias in node.names:  # `from pkg import sub` imports the sub-module when it is one
                if target := _resolve(f"{base}.{alias.name}", modules):
                    yield Import(name, target, where(node))


@functools.cache  # read once for the tests below
def import_graph() -> tuple[Import, ...]:
    modules = all_modules()
    found = [edge for name, path in modules.items() for edge in imports_of(name, path, modules)]
    return tuple(
        edge for edge in dict.fromkeys(found) if edge.imported != edge.importer
    )  # once per statement


def layer(module: str) -> int:
    """The module's place: BASE, a stage's index, or ROOT."""
    parts = module.split(".")
    first = parts[1] if len(parts) > 1 else "__init__"
    if first in STAGES:
        return STAGES.index(first)
    if first in ROOTS:
        return ROOT
    assert first in BASE_MODULES, f"{module}: not a stage, a root or a base module; place it in this test"
    return BASE


def root_of(module: str) -> str:
    return ROOTS[module.split(".")[1]]


def layer_violations(edges: Sequence[Import]) -> list[str]:
    """A base module importing a stage or a root, a stage importing a later stage or a root (the service
    included), a root importing a root it may not."""
    bad = []
    for edge in edges:
        src, dst = layer(edge.importer), layer(edge.imported)
        if src == BASE and dst != BASE:
            bad.append(f"{edge} (a module below the stages imports a stage or a root)")
        elif src != ROOT and dst > src:
            later = (
                f"the composition root {root_of(edge.imported)}"
                if dst == ROOT
                else f"the later stage {STAGES[dst]}"
            )
            bad.append(f"{edge} ({later})")
        elif src == dst == ROOT:
            mine, theirs = root_of(edge.importer), root_of(edge.imported)
            if mine != theirs and theirs not in ROOT_IMPORTS[mine]:
                allowed = ", ".join(sorted(ROOT_IMPORTS[mine])) or "no other root"
                bad.append(f"{edge} (the {mine} root may import {allowed})")
    return bad


def circles(edges: Sequence[Import]) -> list[tuple[list[Import], list[Import]]]:
    """Each strongly connected group of modules (Tarjan): the imports inside it, and one shortest loop."""
    graph: dict[str, list[Import]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, []).append(edge)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # recursion depth is bounded by the module count (a few hundred)
        index[node] = low[node] = len(index)
        stack.append(node)
        for edge in graph.get(node, ()):
            if edge.imported not in index:
                visit(edge.imported)
                low[node] = min(low[node], low[edge.imported])
            elif edge.imported in stack:
                low[node] = min(low[node], index[edge.imported])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [
        (
            [e for e in edges if e.importer in group and e.imported in group],
            _shortest_loop(min(group), group, graph),
        )
        for group in groups
    ]


def _shortest_loop(start: str, group: set[str], graph: dict[str, list[Import]]) -> list[Import]:
    """Breadth-first from ``start`` back to itself inside ``group``: the edges of one loop."""
    paths: dict[str, list[Import]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph.get(node, ()):
                if edge.imported == start:
                    return [*paths[node], edge]
                if edge.imported in group and edge.imported not in paths:
                    paths[edge.imported] = [*paths[node], edge]
                    following.append(edge.imported)
        frontier = following
    raise AssertionError(f"no loop through {start}")  # a strongly connected group always has one


# ---- the checks ------------------------------------------------------------------------------------------


def test_no_import_circles():
    found = circles(import_graph())
    report = "\n\n".join(
        f"circle among {', '.join(sorted({e.importer for e in group}))}; one loop:\n"
        + "\n".join(str(edge) for edge in loop)
        for group, loop in found
    )
    assert not found, f"{len(found)} import circle(s), each as the imports that close it:\n{report}"


def test_no_stage_imports_a_later_stage_or_the_service():
    bad = layer_violations(import_graph())
    assert not bad, f"{len(bad)} import(s) against the stage order:\n" + "\n".join(bad)


def test_every_module_has_a_place():
    for module in all_modules():
        layer(module)


# ---- the checker itself, on made-up graphs ---------------------------------------------------------------


def _edges(*pairs: tuple[str, str]) -> list[Import]:
    return [Import(f"accelbench.{a}", f"accelbench.{b}", f"{a}.py:1") for a, b in pairs]


def test_circles_finds_a_hidden_loop_and_only_that():
    edges = _edges(("service.a", "service.b"), ("service.b", "service.c"), ("service.c", "service.a"),
                   ("reports.x", "hardware.y"), ("service.a", "reports.x"))  # fmt: skip
    ((inside, loop),) = circles(edges)
    assert len(inside) == 3 and [e.importer for e in loop] == [
        "accelbench.service.a",
        "accelbench.service.b",
        "accelbench.service.c",
    ]
    assert circles(_edges(("hardware.a", "util"), ("models.b", "hardware.a"))) == []


def test_layers_refuse_later_stages_the_service_and_stages_under_base():
    edges = _edges(("hardware.a", "models.b"), ("loadtests.c", "service.api"), ("util", "serving.x"),
                   ("reports.d", "loadtests.e"), ("commands.f", "service.api"), ("experiment.g", "cli"),
                   ("serving.h", "experiment.i"), ("documents", "errors"), ("client.j", "service.jobs"),
                   ("service.k", "experiment.spec"), ("client.l", "experiment.pipeline"), ("cli", "client.m"),
                   ("experiment.n", "service.db"), ("service.o", "client.p"), ("errors", "service"))  # fmt: skip
    bad = layer_violations(edges)
    assert [line.split(":")[0] for line in bad] == [
        "hardware.a.py", "loadtests.c.py", "util.py", "experiment.g.py", "serving.h.py", "client.j.py",
        "experiment.n.py", "service.o.py", "errors.py"]  # fmt: skip


def test_function_local_and_relative_imports_are_read(tmp_path):
    fake = tmp_path / "accelbench" / "models" / "a.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        "def f():\n    from accelbench.reports import c\n    from . import b\n    from .b import thing\n"
    )
    modules = dict.fromkeys(["accelbench.models.a", "accelbench.models.b", "accelbench.models",
                             "accelbench.reports.c"], fake)  # fmt: skip
    found = list(imports_of("accelbench.models.a", fake, modules, root=tmp_path))
    assert [str(edge) for edge in found] == [
        "accelbench/models/a.py:2: accelbench.models.a imports accelbench.reports.c",
        "accelbench/models/a.py:3: accelbench.models.a imports accelbench.models.b",
        "accelbench/models/a.py:4: accelbench.models.a imports accelbench.models.b",
    ]


# ---- the files that run inside tritonserver ----------------------------------------------------------------

SERVING = PACKAGE / "serving"
# what the repository writers copy into a model folder (model.py and the files beside it); the discovery
# below must find at least these
SERVER_SIDE = {
    "local_model.py",
    "torch_model.py",
    "llm_model.py",
    "llm_engine.py",
    "torch_runner.py",
    "onnx_torch.py",
    "vllm_model.py",
}


def server_side_files() -> set[str]:
    """The serving modules that run with the server's python: those importing Triton's python-backend
    module, and those the writers name as a ``"<file>.py"`` literal to copy."""
    found = set()
    for path in sorted(SERVING.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import) and any(
                a.name == "triton_python_backend_utils" for a in node.names
            ):
                found.add(path.name)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.endswith(".py")
                and (SERVING / node.value).is_file()
            ):
                found.add(node.value)
    return found


def accelbench_imports(source: str, filename: str = "<source>") -> list[str]:
    """Each statement of ``source`` importing accelbench (or anything relative), anywhere in the file."""
    bad = []
    for node in ast.walk(ast.parse(source, filename)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")] if node.level else [node.module or ""]
        bad += [
            f"{filename}:{node.lineno}: {n}"
            for n in names
            if n.startswith(".") or n.split(".")[0] == "accelbench"
        ]
    return bad


def test_server_side_files_import_nothing_of_accelbench():
    """model.py and the files beside it run with the server's python, where accelbench need not exist."""
    files = server_side_files()
    assert files >= SERVER_SIDE, f"the discovery lost {sorted(SERVER_SIDE - files)}"
    bad = [line for name in sorted(files) for line in accelbench_imports((SERVING / name).read_text(), name)]
    assert not bad, "server-side files importing accelbench:\n" + "\n".join(bad)


def test_accelbench_imports_finds_every_form():
    source = textwrap.dedent("""\
        import json
        import accelbench.util
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from accelbench.serving import llm_engine
        def f():
            from . import sibling
            from .x import y
            import accelbenchmark, accelbench
    """)
    assert accelbench_imports(source) == [
        "<source>:2: accelbench.util",
        "<source>:5: accelbench.serving",
        "<source>:7: .",
        "<source>:8: .x",
        "<source>:9: accelbench",
    ]


# ---- private names stay in their module --------------------------------------------------------------------

# Known private uses across modules, each with the reason it is still here (none today: reports/efficiency.py's
# ``every_point`` and ``siblings`` became public under issue 36).
PRIVATE_ALLOWED: set[tuple[str, str]] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(
    name: str, path: Path, modules: dict[str, Path], root: Path = PACKAGE.parent
) -> Iterator[Import]:
    """Each ``from X import _name`` and ``X._name`` in module ``name`` where X is another accelbench module;
    ``imported`` is ``X._name``."""
    tree = ast.parse(path.read_text(), str(path))
    where = lambda node: f"{path.relative_to(root)}:{node.lineno}"  # noqa: E731
    bound: dict[str, str] = {}  # local name -> the accelbench module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:  # `import a.b` binds `a`; `import a.b as c` binds c to a.b
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            if base not in modules:
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif _private(alias.name) and base != name:
                    yield Import(name, f"{base}.{alias.name}", where(node))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and bound.get(node.value.id, name) != name
        ):
            yield Import(name, f"{bound[node.value.id]}.{node.attr}", where(node))


def test_no_private_name_is_used_across_modules():
    modules = all_modules()
    found = [use for name, path in modules.items() for use in private_uses(name, path, modules)]
    bad = [str(use) for use in found if (use.importer, use.imported) not in PRIVATE_ALLOWED]
    assert not bad, (
        f"{len(bad)} private name(s) used outside their module (make them public or move them):\n"
        + "\n".join(bad)
    )
    stale = PRIVATE_ALLOWED - {(use.importer, use.imported) for use in found}
    assert not stale, f"PRIVATE_ALLOWED lists uses that are gone: remove {sorted(stale)}"


def test_private_uses_finds_from_imports_and_attributes(tmp_path):
    pkg = tmp_path / "accelbench"
    fake = pkg / "reports" / "a.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        textwrap.dedent("""\
        from accelbench.hardware.roofline import _efficiency, public
        from accelbench.reports import b as bee
        import accelbench.reports.b
        from . import c
        from .a import _mine

        def f():
            return bee._hidden, c._other, c.__doc__, _mine, accelbench.reports._nested, public._x
    """)
    )
    modules = dict.fromkeys(
        [
            "accelbench.hardware.roofline",
            "accelbench.reports",
            "accelbench.reports.a",
            "accelbench.reports.b",
            "accelbench.reports.c",
            "accelbench",
        ],
        fake,
    )
    found = sorted(str(use) for use in private_uses("accelbench.reports.a", fake, modules, root=tmp_path))
    assert found == [
        "accelbench/reports/a.py:1: accelbench.reports.a imports accelbench.hardware.roofline._efficiency",
        "accelbench/reports/a.py:8: accelbench.reports.a imports accelbench.reports.b._hidden",
        "accelbench/reports/a.py:8: accelbench.reports.a imports accelbench.reports.c._other",
    ]


def test_the_service_package_map_lists_every_module():
    """service/__init__.py maps the package: each module and folder once, at the start of a line."""
    service = PACKAGE / "service"
    doc = ast.get_docstring(ast.parse((service / "__init__.py").read_text())) or ""
    mapped = [line.split()[0] for line in doc.splitlines() if line.startswith("    ") and line.split()]
    present = [p.name for p in service.glob("*.py") if p.name != "__init__.py"]
    present += [f"{p.name}/" for p in service.iterdir() if p.is_dir() and p.name != "__pycache__"]
    twice = sorted({name for name in mapped if mapped.count(name) > 1})
    assert sorted(mapped) == sorted(present), (
        f"missing from the map: {sorted(set(present) - set(mapped))}; "
        f"mapped but absent: {sorted(set(mapped) - set(present))}; mapped twice: {twice}"
    )
