"""The layers: gpt/ is the workload and imports nothing from harness/ (harness runs it, never the other way
round). Checked twice: every gpt/*.py parsed for an import of harness (also relative or by string), and
every gpt module imported in a fresh interpreter with no harness module loaded afterwards. The record layer,
which every other layer imports, imports nothing of harness outside it (read the same way). The torch-free
rule for compare/report is tests/test_no_torch.py."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPT_FILES = sorted((ROOT / "gpt").glob("*.py"))
LAYER = "harness"


def _is_harness(name: str | None) -> bool:
    return bool(name) and (name == LAYER or name.startswith(LAYER + "."))


def harness_imports(source: str, package: str = "gpt") -> list[str]:
    """Every import in `source` (a module of `package`) that names harness: plain, from, relative (resolved
    against the package), importlib.import_module / __import__ with a literal name. As 'line: name'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - (node.level - 1)] if node.level else []  # `from ..harness import x` out of gpt/
            module = ".".join(base + ([node.module] if node.module else []))
            names = [module] if module else [alias.name for alias in node.names]  # `from .. import harness`
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found += [f"{node.lineno}: {name}" for name in names if _is_harness(name)]
    return found


def test_the_check_finds_every_kind_of_harness_import():
    """The parser below must see each way a gpt module could reach harness (else the next test could not fail)."""
    for source in ("import harness", "import harness.provenance.nvml as n", "from harness import nvml", "from harness.evidence import power",
                   "from .. import harness", "from ..harness import kernels", "import importlib\nimportlib.import_module('harness.run')",
                   "__import__('harness')", "def f():\n    from harness import flags\n"):
        assert harness_imports(source), source
    for source in ("import harnessing", "from gpt import torch_compat", "from . import model", "import torch",
                   "from .config import WorkloadConfig"):
        assert not harness_imports(source), source


@pytest.mark.parametrize("path", GPT_FILES, ids=[p.name for p in GPT_FILES])
def test_gpt_source_imports_no_harness(path):
    assert harness_imports(path.read_text()) == [], f"gpt/{path.name} imports harness"


def test_importing_gpt_loads_no_harness_module():
    modules = ", ".join(f"gpt.{p.stem}" for p in GPT_FILES if p.stem != "__init__")
    code = (f"import sys, gpt, {modules}; "
            f"print(sorted(m for m in sys.modules if m == {LAYER!r} or m.startswith({LAYER + '.'!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"importing gpt loaded {out.stdout.strip()}"


RECORD_FILES = sorted((ROOT / "harness" / "record").glob("*.py"))


@pytest.mark.parametrize("path", RECORD_FILES, ids=[p.name for p in RECORD_FILES])
def test_the_record_layer_imports_neither_side(path):
    """docs/architecture.md: imports point toward the record layer, which imports neither the runner side nor analysis."""
    outside = [found for found in harness_imports(path.read_text(), "harness.record")
               if not found.split(": ", 1)[1].startswith("harness.record")]
    assert outside == [], f"harness/record/{path.name} imports {outside}"


# ---------------------------------------------------------------- harness: analysis below the command lines, no circles

COMMAND_LINES = ("harness.run", "harness.batch_search", "harness.tune", "harness.compare", "harness.report",
                 "harness.runner.launcher", "harness.runner.progress", "harness.runner.request", "harness.docker", "harness.cluster",
                 "harness.envs.__main__")


def harness_graph() -> dict[str, set[str]]:
    """module -> the harness modules it imports (any import in the file, deferred or under TYPE_CHECKING too;
    `from harness.x import y` is an edge to harness.x.y where that is a module, else to harness.x)."""
    mods = {}
    for p in sorted((ROOT / "harness").rglob("*.py")):
        mods[".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = p
    graph = {}
    for name, p in mods.items():
        found = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):  # a package's own __init__: no circle
                    found.add(target)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    out, seen = [], set()
    def visit(node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                key = frozenset(path)
                if key not in seen:
                    seen.add(key)
                    out.append(path + [nxt])
            elif nxt not in path and nxt > path[0]:  # each circle once, from its smallest module
                visit(nxt, path + [nxt])
    for start in sorted(graph):
        visit(start, [start])
    return out


def test_no_import_circle_among_harness_modules():
    assert cycles(harness_graph()) == []


def test_the_circle_check_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_analysis_imports_no_command_line_module():
    """harness.analysis is a library the command lines call, never the other way round (its rules, like the batch
    search's fit rule, live in it)."""
    graph = harness_graph()
    bad = [f"{m} imports {t}" for m, targets in graph.items() if _within(m, ("harness.analysis",))
           for t in targets if _within(t, COMMAND_LINES)]
    assert bad == []


# ---------------------------------------------------------------- the layers of docs/architecture.md, both ways

# The command lines: parse arguments and call the layers below (harness.cluster's and harness.envs' packages hold
# library modules too: only their __main__ and CLI modules are command lines).
CLI = ("harness.run", "harness.batch_search", "harness.tune", "harness.compare", "harness.report.__main__",
       "harness.docker", "harness.cluster.__main__", "harness.envs.__main__", "harness.bisect.__main__")
# The runner side: what measures (the request, the launcher and its worker, what a worker captures).
RUNNER = ("harness.runner", "harness.lifeline", "harness.worker", "harness.provenance", "harness.evidence")
RENDERING = ("harness.console.render", "harness.console.verdict_text", "harness.console.csv_json",
             "harness.report.document", "harness.report.outline", "harness.report.charts",
             "harness.report.delta_charts", "harness.report.figures", "harness.report.versions_chart")
# Known crossings, each with the issue that removes it; the test fails when one is gone, so the list only shrinks.
KNOWN: dict = {}  # crossings known and tolerated, each with the issue that removes it (none left)


def _within(module: str, layer: tuple) -> bool:
    return any(module == name or module.startswith(name + ".") for name in layer)


def crossings(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(module, imported) pairs that break the layering: rendering importing the runner side, the runner side
    importing a command line."""
    return {(m, t) for m, targets in graph.items() for t in targets
            if (_within(m, RENDERING) and _within(t, RUNNER)) or (_within(m, RUNNER) and _within(t, CLI))}


def test_rendering_imports_no_runner_module_and_the_runner_side_no_command_line():
    found = crossings(harness_graph())
    assert found - set(KNOWN) == set(), "layering broken (docs/architecture.md)"
    assert set(KNOWN) - found == set(), "a known crossing is gone: remove it from KNOWN"


def test_the_layer_check_finds_a_crossing():
    graph = {"harness.console.render": {"harness.worker"}, "harness.runner.launcher": {"harness.run"},
             "harness.report.outline": {"harness.analysis.stats"}, "harness.worker": {"harness.runner.flags"}}
    assert crossings(graph) == {("harness.console.render", "harness.worker"), ("harness.runner.launcher", "harness.run")}


# ---------------------------------------------------------------- module size (docs/architecture.md)

MAX_MODULE_LINES = 450
SOURCES = sorted([*(ROOT / "harness").rglob("*.py"), *(ROOT / "gpt").rglob("*.py")])


def test_no_module_is_over_the_size_a_reader_takes_in():
    """A module longer than this holds more than one concern: split it by concern (issue 51)."""
    long = {p.relative_to(ROOT).as_posix(): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert SOURCES and not long, f"over {MAX_MODULE_LINES} lines: {long}"
