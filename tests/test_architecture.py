"""The architecture the README states, checked on the code (issue 12).

- every module of the package has a row in the architecture table of the docs
  (``docs/guide/architecture.md``, the page the README links to);
- no import cycles between rumi_xarray modules, function-level imports included;
- only ``rumi_xarray/native/`` imports ``rumi``/``geozl`` and only
  ``rumi_xarray/dask/`` imports ``dask``/``distributed``;
- the xarray entry point is light: listing engines loads neither librumi nor
  dask because of us, and importing rumi_xarray changes no librumi setting;
- the package ships ``py.typed`` and ``make lint`` (ruff + mypy) passes, so CI,
  which runs ``make test``, holds the annotations to what ``py.typed`` promises.

Imports are read with :mod:`ast` from the source, so an import inside a
function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rumi_xarray"

#: Third-party top-level packages -> the only folder of the package allowed to import them.
OWNERS = {
    "rumi": "rumi_xarray.native",
    "geozl": "rumi_xarray.native",
    "dask": "rumi_xarray.dask",
    "distributed": "rumi_xarray.dask",
    "torch": "rumi_xarray.torch",
}


@dataclass(frozen=True)
class Import:
    """One import statement (or importlib call) of a package module."""

    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (a package module when it is ours)
    path: Path
    line: int
    type_checking: bool  # inside ``if TYPE_CHECKING:``: never runs

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def package_modules() -> dict[str, Path]:
    """Return every module of the package by dotted name (packages by their ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, known: dict[str, Path]) -> None:
        self.module, self.path, self.known = module, path, known
        # The package a relative import starts from.
        self.package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        self.found: list[Import] = []
        self._type_checking = 0

    def _add(self, target: str, node: ast.AST) -> None:
        self.found.append(Import(self.module, target, self.path, node.lineno,
                                 self._type_checking > 0))

    def _absolute(self, name: str | None, level: int) -> str:
        if level == 0:
            return name or ""
        base = self.package.split(".")
        base = base[:len(base) - (level - 1)]
        return ".".join([*base, name] if name else base)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._absolute(node.module, node.level)
        for alias in node.names:
            # ``from pkg import sub`` imports the module pkg.sub; ``from pkg import name``
            # imports pkg.
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.known else base, node)

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("x") / __import__("x") with a literal name.
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if (name in ("import_module", "__import__") and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            text = node.args[0].value
            level = len(text) - len(text.lstrip("."))
            self._add(self._absolute(text.lstrip(".") or None, level), node)
        self.generic_visit(node)


def all_imports() -> list[Import]:
    """Return every import of every package module, wherever it stands in the module."""
    known = package_modules()
    found = []
    for module, path in known.items():
        collector = _Collector(module, path, known)
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        found.extend(collector.found)
    return found


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of a directed graph (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _shortest_cycle(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    """Return a shortest cycle through ``start`` inside one component (BFS)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in members:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    return [start]


def import_cycles() -> list[str]:
    """Describe every import cycle between package modules, with file:line of each edge."""
    imports = [i for i in all_imports()
               if not i.type_checking and i.target in package_modules() and i.target != i.module]
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], list[str]] = {}
    for i in imports:
        graph.setdefault(i.module, set()).add(i.target)
        lines.setdefault((i.module, i.target), []).append(i.where())
    reports = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        members = set(component)
        cycle = _shortest_cycle(graph, component[0], members)
        edges = [f"    {a} -> {b} ({', '.join(lines[(a, b)])})"
                 for a in component for b in sorted(graph[a] & members)]
        reports.append(f"cycle {' -> '.join(cycle)}; every import inside it:\n"
                       + "\n".join(edges))
    return reports


# ---------------------------------------------------------------------------
# (a) the architecture table (docs/guide/architecture.md)

#: The page holding the module table (it moved out of the README with the user guide).
ARCHITECTURE_PAGE = ROOT / "docs" / "guide" / "architecture.md"


def readme_table_modules(readme: str) -> set[str]:
    """Return the module paths named in the first table under ``# Architecture``.

    The heading may be ``#`` (the docs page) or ``##`` (a README section).

    Paths are relative to ``rumi_xarray/`` and written in backticks, one or more
    per cell: ``backend/array.py``, ``__init__.py``.
    """
    section = re.search(r"(?ms)^##? Architecture\s*$(.*?)(?=^##? |\Z)", readme)
    if section is None:
        return set()
    table, started = [], False
    for line in section.group(1).splitlines():
        if line.lstrip().startswith("|"):
            table.append(line)
            started = True
        elif started:
            break
    named = set()
    for row in table:
        for code in re.findall(r"`([^`]+)`", row):
            for token in re.split(r"[\s,]+", code):
                token = token.removeprefix("rumi_xarray/")
                if token.endswith(".py"):
                    named.add(token)
    return named


def modules_needing_a_row() -> set[str]:
    """Return the package's module paths the table must list.

    Every ``.py`` file, relative to ``rumi_xarray/``, except ``__main__.py`` and
    the ``__init__.py`` of subpackages (folder markers); the top-level
    ``__init__.py`` holds the public API and needs its row.
    """
    paths = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "__main__.py" or (path.name == "__init__.py" and rel != "__init__.py"):
            continue
        paths.add(rel)
    return paths


def test_readme_table_parser_reads_module_paths() -> None:
    readme = """# x

## Architecture

Intro text.

| module | holds |
|---|---|
| `__init__.py` | public API |
| `model/grid.py`, `model/cube.py` | grid; cube |
| `rumi_xarray/backend/array.py` | backend array (`OUTER` keys) |

| later table | ignored |
|---|---|
| `other.py` | no |

## Benchmarks

| `bench.py` | no |
"""
    assert readme_table_modules(readme) == {
        "__init__.py", "model/grid.py", "model/cube.py", "backend/array.py"}


def test_every_module_has_a_row_in_the_architecture_table() -> None:
    named = readme_table_modules(ARCHITECTURE_PAGE.read_text())
    missing = sorted(modules_needing_a_row() - named)
    stale = sorted(m for m in named if not (PACKAGE / m).is_file())
    assert not missing and not stale, (
        "docs/guide/architecture.md '# Architecture' table, paths relative to rumi_xarray/:\n"
        f"  modules without a row: {missing}\n  rows naming no module: {stale}")


# ---------------------------------------------------------------------------
# (b) no import cycles


def test_cycle_finder_reports_function_level_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    components = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert components == [["a", "b", "c"]]
    assert _shortest_cycle(graph, "a", {"a", "b", "c"}) == ["a", "b", "c", "a"]


def test_collector_sees_function_level_relative_and_importlib_imports(tmp_path: Path) -> None:
    source = """
from __future__ import annotations
import importlib
from typing import TYPE_CHECKING
from . import errors
from ..model import grid
if TYPE_CHECKING:
    from rumi_xarray.backend import array
def f():
    import dask.array
    from ..native import reads
    importlib.import_module("rumi")
"""
    path = PACKAGE / "model" / "example.py"  # only its name matters: it is never written
    known = package_modules()
    collector = _Collector("rumi_xarray.model.example", path, known)
    collector.visit(ast.parse(source))
    got = {(i.target, i.type_checking) for i in collector.found}
    assert got == {("importlib", False), ("typing", False), ("__future__", False),
                   ("rumi_xarray.model", False), ("rumi_xarray.model.grid", False),
                   ("rumi_xarray.backend.array", True), ("dask.array", False),
                   ("rumi_xarray.native.reads", False), ("rumi", False)}


def test_no_import_cycles_between_package_modules() -> None:
    cycles = import_cycles()
    assert not cycles, "import cycles (function-level imports count; TYPE_CHECKING ones "\
        "do not):\n" + "\n".join(cycles)


# ---------------------------------------------------------------------------
# (c) who may import librumi and dask


def forbidden_imports() -> list[str]:
    """Return ``file:line module imports X`` for each import of X outside its owner folder."""
    found = []
    for i in all_imports():
        top = i.target.partition(".")[0]
        owner = OWNERS.get(top)
        if owner is None or i.module == owner or i.module.startswith(owner + "."):
            continue
        found.append(f"{i.where()}: {i.module} imports {i.target}"
                     f"{' (under TYPE_CHECKING)' if i.type_checking else ''}; only {owner} may")
    return found


def test_only_native_imports_librumi_and_only_dask_imports_dask() -> None:
    found = forbidden_imports()
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------
# (d) a light entry point, no settings changed at import

#: What our entry point must never load: librumi, dask and their rumi_xarray homes.
HEAVY = re.compile(r"^(rumi|geozl|dask|distributed|rumi_xarray\.native|rumi_xarray\.dask)(\.|$)")


def _run(program: str, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", program, *args], capture_output=True,
                         text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout.strip().splitlines()[-1]


def test_loading_our_entry_point_loads_neither_librumi_nor_dask(tmp_path: Path) -> None:
    # What xarray does with an entry point when it lists engines (load the class,
    # instantiate it, read open_dataset's signature) and when it guesses an engine for
    # a file that is not ours (guess_can_open).
    other = tmp_path / "other.nc"
    other.write_bytes(b"CDF\x01" + bytes(60))
    program = """
import inspect, json, sys
from importlib.metadata import entry_points
import xarray
before = set(sys.modules)
(ep,) = [e for e in entry_points(group="xarray.backends") if e.name == "rumi"]
backend = ep.load()()
inspect.signature(backend.open_dataset)
assert not backend.guess_can_open(sys.argv[1])
assert not backend.guess_can_open("s3://bucket/scene.nc")
assert backend.guess_can_open("https://example.org/scene.rumi")
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    loaded = json.loads(_run(program, str(other)))
    assert "rumi_xarray.backend.entrypoint" in loaded
    heavy = [m for m in loaded if HEAVY.match(m)]
    assert not heavy, f"the rumi entry point loads {heavy}"


def test_listing_engines_loads_neither_librumi_nor_dask_because_of_us() -> None:
    # Other installed backends (rioxarray, ...) may load what they like; compare a run
    # of xarray.backends.list_engines() with and without our entry point.
    program = """
import json, sys
import xarray
from importlib.metadata import EntryPoints
from xarray.backends import plugins
if sys.argv[1] == "without":
    everything = plugins.entry_points
    def entry_points(group):
        return EntryPoints(e for e in everything(group=group) if e.name != "rumi")
    plugins.entry_points = entry_points
before = set(sys.modules)
engines = xarray.backends.list_engines()
assert ("rumi" in engines) == (sys.argv[1] == "with"), sorted(engines)
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    with_us = set(json.loads(_run(program, "with")))
    without_us = set(json.loads(_run(program, "without")))
    ours = sorted(with_us - without_us)
    heavy = [m for m in ours if HEAVY.match(m)]
    assert not heavy, f"listing engines loads {heavy} because of rumi_xarray"


def test_import_changes_no_librumi_setting() -> None:
    # Settings (and the environment variables that map onto them) apply at the first
    # read, never at import or at the first use of a lazy public name.
    # tests/test_hardening.py checks that the first read then turns checksums on.
    program = """
import rumi
before = (rumi.get_checksum_verification(), rumi.get_num_threads())
import xarray
import rumi_xarray as rx
xarray.backends.list_engines()
for name in ("open_dataset", "open_catalog", "open_mfdataset", "to_rumi", "stats"):
    getattr(rx, name)
with rx.set_options(verify=True, threads=2):
    pass
after = (rumi.get_checksum_verification(), rumi.get_num_threads())
assert after == before, (before, after)
print("unchanged", before)
"""
    env = {**os.environ, "RUMI_VERIFY": "1", "RUMI_NUM_THREADS": "2"}
    assert _run(program, env=env).startswith("unchanged")


# ---------------------------------------------------------------------------
# (e) typed package, lint run by CI


def test_package_ships_py_typed() -> None:
    assert (PACKAGE / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = config["tool"]["setuptools"]["package-data"]["rumi_xarray"]
    assert "py.typed" in package_data


def lint_commands() -> list[list[str]]:
    """Return the recipe of the Makefile's ``lint`` target, run with this interpreter's tools.

    ``$(VENV)/bin/tool`` becomes the tool next to ``sys.executable``, so the test
    runs in CI exactly what ``make lint`` runs, in the environment under test.
    """
    makefile = (ROOT / "Makefile").read_text()
    rule = re.search(r"(?m)^lint:.*\n((?:\t.*\n?)+)", makefile)
    assert rule, "the Makefile has no lint target"
    bindir = Path(sys.executable).parent
    commands = []
    for line in rule.group(1).splitlines():
        words = shlex.split(line.strip())
        words[0] = str(bindir / Path(words[0].replace("$(VENV)/bin/", "")).name)
        commands.append(words)
    return commands


def test_make_lint_runs_ruff_and_mypy() -> None:
    tools = [Path(c[0]).name for c in lint_commands()]
    assert tools == ["ruff", "mypy"], tools
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["mypy"]["disallow_untyped_defs"] is True


def test_make_lint_passes() -> None:
    # CI runs `make test`; this runs `make lint` in it. (make test-min deselects it: the
    # lint tools' floors are not what the configuration was written for.)
    failures = []
    for command in lint_commands():
        out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
        if out.returncode != 0:
            failures.append(f"$ {' '.join(command)}\n{out.stdout[-6000:]}{out.stderr[-2000:]}")
    assert not failures, "\n".join(failures)
