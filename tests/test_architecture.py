"""The architecture the README states, checked on the code (issue 12).

- every module of the package has a row in the architecture table of the docs
  (``docs/guide/architecture.md``, the page the README links to);
- no import cycles between rumi_xarray modules, function-level imports included;
- only ``rumi_xarray/native/`` imports ``rumi``/``geozl``; ``dask``/``distributed``
  are imported only by the modules :data:`DASK_MODULES` names, one by one;
- the layers :data:`LAYERS` are stacked in order: no import runs from a lower
  layer to a higher one (function-level imports count, ``TYPE_CHECKING`` ones do
  not), except ``sources -> errors``;
- ``model/`` is pure: what it imports, followed through the package, imports no
  third-party package but numpy;
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

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rumi_xarray"

#: Third-party top-level packages -> the only folders (or modules) of the package allowed to
#: import them. ``native/reads.py`` hands a chip batch assembled from several native calls
#: to the framework the caller names through DLPack (``adopt``), as librumi's
#: ``framework=`` does for one call's array: it imports torch, jax and tensorflow then.
OWNERS = {
    "rumi": ("rumi_xarray.native",),
    "geozl": ("rumi_xarray.native",),
    "torch": ("rumi_xarray.torch", "rumi_xarray.native.reads"),
    "jax": ("rumi_xarray.native.reads",),
    "tensorflow": ("rumi_xarray.native.reads",),
}
#: The only module that may import a module whose name the AST cannot read (a variable
#: passed to ``importlib.import_module``): the package's lazy public API, whose names are
#: its own modules (``_LAZY``). Anywhere else such an import would hide from the checks.
DYNAMIC_IMPORTERS = frozenset({"rumi_xarray"})

#: The only modules that import dask or distributed, named one by one: every module of
#: ``dask/``, and two that live beside the code they run (issue 21): the graph of a STAC
#: load beside its planner and reader, the dask side of writing beside ``to_rumi``.
#: A module not named here imports dask through one of these.
DASK_MODULES = frozenset({
    "rumi_xarray.dask.chunks",
    "rumi_xarray.dask.cluster",
    "rumi_xarray.dask.graphs",
    "rumi_xarray.dask.optimize",
    "rumi_xarray.dask.config",
    "rumi_xarray.stac.graph",
    "rumi_xarray.write.batches",
    "rumi_xarray.ingestion.execute",
})
#: Third-party top-level packages -> the only modules allowed to import them.
NAMED_OWNERS = {"dask": DASK_MODULES, "distributed": DASK_MODULES}

#: The package's layers, lowest first: a module may import its own layer and those below,
#: never one above (function-level imports included). A layer is a top-level module or
#: folder of ``rumi_xarray``; ``__init__`` is the package itself (the public API), with
#: ``__main__`` (``python -m rumi_xarray``, which only calls the CLI).
LAYERS = ["formatting", "sources", "errors", "options", "model", "dask", "native",
          "conventions", "progress", "write", "backend", "catalogs", "stac", "ingestion",
          "torch", "demo", "cli", "__init__"]
#: The one upward import allowed, (lower layer, higher layer): a source's errors are
#: RumiErrors, and errors redact sources.
ALLOWED_UPWARD = frozenset({("sources", "errors")})


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
        self.dynamic: list[int] = []  # lines importing a name held in a variable
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
        elif name in ("import_module", "__import__") and node.args:
            self.dynamic.append(node.lineno)
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
    """Return the module paths named in the tables under ``## Modules`` of ``# Architecture``.

    The heading may be ``#`` (the docs page) or ``##`` (a README section).

    Paths are relative to ``rumi_xarray/`` and written in backticks, one or more
    per cell: ``backend/array.py``, ``__init__.py``.
    """
    section = re.search(r"(?ms)^##? Architecture\s*$(.*?)(?=^# |\Z)", readme)
    if section is None:
        return set()
    # The module tables, one per folder under "## Modules", up to the next section.
    modules = re.search(r"(?ms)^## Modules\s*$(.*?)(?=^## |\Z)", section.group(1))
    table = [line for line in (modules or section).group(1).splitlines()
             if line.lstrip().startswith("|")]
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
    page = """# Architecture

Intro text.

| layer table | ignored |
|---|---|
| `layers.py` | no |

## Modules

### The face

| module | holds |
|---|---|
| `__init__.py` | public API |

### model

| module | holds |
|---|---|
| `model/grid.py`, `model/cube.py` | grid; cube |
| `rumi_xarray/backend/array.py` | backend array (`OUTER` keys) |

## Where to make a change

| to add | change |
|---|---|
| `other.py` | no |

# Benchmarks

| `bench.py` | no |
"""
    assert readme_table_modules(page) == {
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
# (c) who may import librumi, torch and dask


def forbidden_imports(imports: list[Import] | None = None) -> list[str]:
    """Return ``file:line module imports X`` for each import of X by a module not allowed to.

    ``rumi``, ``geozl`` and ``torch`` are allowed in their owner folder (:data:`OWNERS`);
    ``dask`` and ``distributed`` only in the modules :data:`NAMED_OWNERS` names: a new
    module of ``dask/`` is not allowed until it is named.
    """
    found = []
    for i in all_imports() if imports is None else imports:
        top = i.target.partition(".")[0]
        where = f"{i.where()}: {i.module} imports {i.target}" + (
            " (under TYPE_CHECKING)" if i.type_checking else "")
        named = NAMED_OWNERS.get(top)
        if named is not None:
            if i.module not in named:
                found.append(f"{where}; only the modules named in DASK_MODULES may: "
                             f"{', '.join(sorted(named))}")
            continue
        owners = OWNERS.get(top)
        if owners is None or any(i.module == o or i.module.startswith(o + ".")
                                 for o in owners):
            continue
        found.append(f"{where}; only {', '.join(owners)} may")
    return found


def _imports(*edges: tuple[str, str] | tuple[str, str, bool], line: int = 7) -> list[Import]:
    """Return synthetic imports ``(module, target[, type_checking])``, all at ``line``."""
    return [Import(module, target, PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py"),
                   line, bool(rest and rest[0])) for module, target, *rest in edges]


def test_owner_checker_allows_only_named_modules_to_import_dask() -> None:
    found = forbidden_imports(_imports(
        ("rumi_xarray.stac.graph", "dask.array"),        # named: allowed
        ("rumi_xarray.write.batches", "dask"),           # named: allowed
        ("rumi_xarray.stac.load", "dask.array"),         # beside a named one: refused
        ("rumi_xarray.dask.newcomer", "distributed"),    # in dask/ but unnamed: refused
        ("rumi_xarray.backend.array", "dask", True),     # TYPE_CHECKING: still refused
        ("rumi_xarray.native.reads", "rumi"),            # owner folder: allowed
        ("rumi_xarray.backend.open", "geozl"),           # outside native/: refused
        ("rumi_xarray.backend.open", "numpy"),           # nobody's: allowed
    ))
    assert [f.partition(": ")[0] for f in found] == [
        "rumi_xarray/stac/load.py:7", "rumi_xarray/dask/newcomer.py:7",
        "rumi_xarray/backend/array.py:7", "rumi_xarray/backend/open.py:7"], found
    assert "only the modules named in DASK_MODULES may" in found[0]
    assert "(under TYPE_CHECKING)" in found[2]
    assert found[3].endswith("only rumi_xarray.native may")


def test_owner_checker_allows_torch_only_in_its_two_owners() -> None:
    found = forbidden_imports(_imports(
        ("rumi_xarray.torch", "torch.utils.data"),       # the torch module: allowed
        ("rumi_xarray.native.reads", "torch"),           # DLPack hand-over: allowed
        ("rumi_xarray.native.reads", "jax.dlpack"),      # allowed
        ("rumi_xarray.native.process", "torch"),         # beside it in native/: refused
        ("rumi_xarray.backend.chips", "tensorflow"),     # refused
    ))
    assert [f.partition(": ")[0] for f in found] == [
        "rumi_xarray/native/process.py:7", "rumi_xarray/backend/chips.py:7"], found
    assert found[0].endswith("only rumi_xarray.torch, rumi_xarray.native.reads may")


def dynamic_imports() -> list[str]:
    """Return ``file:line module`` for each import of a name the AST cannot read."""
    found = []
    known = package_modules()
    for module, path in known.items():
        collector = _Collector(module, path, known)
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        found += [f"{path.relative_to(ROOT)}:{line}: {module}" for line in collector.dynamic]
    return found


def test_no_module_hides_an_import_from_these_checks() -> None:
    # importlib.import_module(name) with a variable name is an import no check here sees
    # (a framework imported that way once slipped past the owner rule).
    found = [f for f in dynamic_imports() if f.rpartition(": ")[2] not in DYNAMIC_IMPORTERS]
    assert not found, "\n".join(found)
    assert dynamic_imports(), "the lazy API's import_module is no longer seen: fix the check"


def test_only_native_imports_librumi_and_only_named_modules_import_dask() -> None:
    found = forbidden_imports()
    assert not found, "\n".join(found)


def test_every_module_named_to_import_dask_exists_and_imports_it() -> None:
    # A name left in DASK_MODULES after its module moved or stopped importing dask
    # would let a new module of that name import dask unseen.
    importing = {i.module for i in all_imports()
                 if i.target.partition(".")[0] in NAMED_OWNERS}
    known = package_modules()
    stale = sorted(m for m in DASK_MODULES if m not in known or m not in importing)
    assert not stale, f"DASK_MODULES names modules that do not exist or import no dask: {stale}"


# ---------------------------------------------------------------------------
# (f) the layer order


def layer_of(module: str) -> str:
    """Return the layer of a package module: its top-level module or folder.

    ``rumi_xarray`` itself and ``rumi_xarray.__main__`` are the top layer, ``__init__``.
    """
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "__init__"
    return parts[1]


def upward_imports(imports: list[Import] | None = None,
                   layers: list[str] = LAYERS,
                   allowed: frozenset[tuple[str, str]] = ALLOWED_UPWARD) -> list[str]:
    """Return ``file:line module (layer) imports target (layer)`` for each upward import.

    An import is upward when the imported package module is in a higher layer than the
    importing one. Function-level imports count; ``TYPE_CHECKING`` ones never run and do
    not. ``allowed`` holds the ``(lower, higher)`` pairs let through.
    """
    rank = {layer: n for n, layer in enumerate(layers)}
    found = []
    for i in all_imports() if imports is None else imports:
        if i.type_checking or i.target.partition(".")[0] != "rumi_xarray":
            continue
        low, high = layer_of(i.module), layer_of(i.target)
        if rank[high] <= rank[low] or (low, high) in allowed:
            continue
        found.append(f"{i.where()}: {i.module} ({low}) imports {i.target} ({high})")
    return found


def test_layer_checker_reports_upward_imports() -> None:
    layers = ["errors", "model", "stac", "__init__"]
    found = upward_imports(_imports(
        ("rumi_xarray.stac.load", "rumi_xarray.model.grid"),   # downward
        ("rumi_xarray.stac.load", "rumi_xarray.stac.plan"),    # same layer
        ("rumi_xarray.model.grid", "rumi_xarray.stac.plan"),   # upward
        ("rumi_xarray.model.grid", "rumi_xarray.stac.load", True),  # TYPE_CHECKING
        ("rumi_xarray.errors", "rumi_xarray.model"),           # upward, but allowed
        ("rumi_xarray.stac.load", "rumi_xarray"),              # upward to the package
        ("rumi_xarray.__main__", "rumi_xarray.stac.load"),     # the top layer
        ("rumi_xarray.model.grid", "numpy"),                   # not ours
    ), layers, frozenset({("errors", "model")}))
    assert found == [
        "rumi_xarray/model/grid.py:7: rumi_xarray.model.grid (model) imports "
        "rumi_xarray.stac.plan (stac)",
        "rumi_xarray/stac/load.py:7: rumi_xarray.stac.load (stac) imports rumi_xarray "
        "(__init__)"], found


def test_every_module_is_in_a_layer() -> None:
    missing = sorted({layer_of(m) for m in package_modules()} - set(LAYERS))
    assert not missing, f"top-level modules or folders with no place in LAYERS: {missing}"


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    found = upward_imports()
    assert not found, (f"imports against the layer order {' < '.join(LAYERS)} "
                       f"(allowed: {sorted(ALLOWED_UPWARD)}):\n" + "\n".join(found))


# ---------------------------------------------------------------------------
# (g) model/ is pure

#: The third-party packages model/ may reach.
MODEL_MAY_IMPORT = frozenset({"numpy"})


def impure_model_imports(imports: list[Import] | None = None,
                         roots: str = "rumi_xarray.model") -> list[str]:
    """Return each third-party import in what ``roots`` imports, followed through the package.

    The modules under ``roots``, then every package module they import, and so on
    (function-level imports count, ``TYPE_CHECKING`` ones do not), must import only
    the standard library (:data:`sys.stdlib_module_names`), numpy and the package.
    Each report names ``file:line``, the import and the chain of modules from model/.
    """
    imports = [i for i in (all_imports() if imports is None else imports)
               if not i.type_checking]
    by_module: dict[str, list[Import]] = {}
    for i in imports:
        by_module.setdefault(i.module, []).append(i)
    start = sorted(m for m in by_module if m == roots or m.startswith(roots + "."))
    via: dict[str, str | None] = dict.fromkeys(start)
    queue = list(start)
    found = []
    while queue:
        module = queue.pop(0)
        for i in by_module.get(module, []):
            top = i.target.partition(".")[0]
            if top == "rumi_xarray":
                if i.target not in via:
                    via[i.target] = module
                    queue.append(i.target)
                continue
            if top in sys.stdlib_module_names or top in MODEL_MAY_IMPORT:
                continue
            chain = [module]
            while (parent := via[chain[-1]]) is not None:
                chain.append(parent)
            found.append(f"{i.where()}: {i.module} imports {i.target} "
                         f"(reached {' <- '.join(chain)})")
    return found


def test_model_purity_checker_follows_package_imports() -> None:
    found = impure_model_imports(_imports(
        ("rumi_xarray.model.a", "numpy"),
        ("rumi_xarray.model.a", "os.path"),
        ("rumi_xarray.model.a", "rumi_xarray.errors"),
        ("rumi_xarray.errors", "rumi_xarray.sources.redact"),
        ("rumi_xarray.sources.redact", "fsspec"),                 # two steps away
        ("rumi_xarray.model.b", "xarray", True),                  # TYPE_CHECKING
        ("rumi_xarray.backend.open", "xarray"),                   # never reached
    ))
    assert found == ["rumi_xarray/sources/redact.py:7: rumi_xarray.sources.redact imports "
                     "fsspec (reached rumi_xarray.sources.redact <- rumi_xarray.errors <- "
                     "rumi_xarray.model.a)"], found


def test_model_imports_no_third_party_package_but_numpy() -> None:
    found = impure_model_imports()
    assert not found, "model/ must stay pure (stdlib and numpy only):\n" + "\n".join(found)


# ---------------------------------------------------------------------------
# (d) a light entry point, no settings changed at import but checksum verification

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


def test_import_changes_no_librumi_setting_but_verification() -> None:
    # Settings (and the environment variables that map onto them) apply at the first
    # read, never at import or at the first use of a lazy public name; the one exception,
    # checksum verification turned on at import, is tested in tests/test_verification.py
    # (here RUMI_VERIFY=1 chooses it before the import, so it stays as it is).
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


# ruff takes a second; mypy about 40 s of one core without its cache (a fresh clone), so
# `make test` leaves it to `make lint`, which CI runs after `make test` (and `make bench`
# runs this slow case). make test-min deselects both: the lint tools' floors are not what
# the configuration was written for.
@pytest.mark.parametrize("tool", [
    "ruff", pytest.param("mypy", marks=pytest.mark.slow)])
def test_make_lint_passes(tool: str) -> None:
    [command] = [c for c in lint_commands() if Path(c[0]).name == tool]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, \
        f"$ {' '.join(command)}\n{out.stdout[-6000:]}{out.stderr[-2000:]}"


# --- the conformance matrix covers every door (issue 29) ---------------------------------

#: Public names that neither open nor read raster data, and why: every other public
#: function of ``rumi_xarray``, ``rumi_xarray.torch`` and the ``.rumi`` accessor is a
#: door, and must be a row of the conformance matrix (``DOORS`` in tests/test_conformance.py).
NOT_DOORS = {
    "Explanation": "a cost report",
    "IngestReport": "what an ingest did",
    "cache_info": "tile-cache statistics",
    "catalog": "reads headers into a table, no samples",
    "clear_cache": "empties the tile cache",
    "explain": "a dry run, no I/O",
    "explain_chips": "a dry run, no I/O",
    "get_options": "settings",
    "ingest": "writes Rumi files from other formats (tests/test_ingest.py checks every "
              "output against rioxarray on its source)",
    "overview_factors": "lists a file's overview levels from its sidecar, no samples (the "
                        "levels themselves are the matrix's overview row)",
    "set_options": "settings",
    "stats": "read counters",
    "to_rumi": "writes",
    "to_stac": "describes files, no samples",
    "write_array": "writes",
    "torch.GridChipSampler": "yields chip positions",
    "torch.RandomChipSampler": "yields chip positions",
    "torch.collate": "stacks samples a door read",
    ".rumi.explain": "a dry run, no I/O",
    ".rumi.explain_chips": "a dry run, no I/O",
    ".rumi.explore": "shows what another door opened, decoded as that variable is "
                     "(tests/test_explore.py checks every value it shows against rumi.read)",
    ".rumi.to_rumi": "writes",
}
#: A public name -> the rows of the matrix that read through it.
DOOR_ROWS = {
    "RumiBackendEntrypoint": ("xr.open_dataset", "xr.open_mfdataset"),
}


def _literal_all(path: Path) -> list[str]:
    """Return the names of a module's literal ``__all__`` list (read with ast)."""
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                 for t in node.targets)):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return []


def public_doors() -> dict[str, tuple[str, ...]]:
    """Return every public name that opens or reads data -> the matrix rows it needs."""
    names = [n for n in _literal_all(PACKAGE / "__init__.py")]
    names += [f"torch.{n}" for n in _literal_all(PACKAGE / "torch.py")]
    tree = ast.parse((PACKAGE / "backend" / "accessor.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "_RumiAccessor":
            names += [f".rumi.{f.name}" for f in node.body
                      if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")
                      and not any(isinstance(d, ast.Name) and d.id == "property"
                                  for d in f.decorator_list)]
    out = {}
    for name in names:
        if name in NOT_DOORS:
            continue
        short = name if name.startswith((".", "torch.")) else f"rx.{name}"
        out[name] = DOOR_ROWS.get(name, (short,))
    return out


def matrix_doors() -> set[str]:
    """Return the keys of ``DOORS`` in tests/test_conformance.py (read with ast)."""
    tree = ast.parse((ROOT / "tests" / "test_conformance.py").read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if isinstance(target, ast.Name) and target.id == "DOORS":
            value = node.value  # type: ignore[attr-defined]
            return {k.value.split(" (")[0] for k in value.keys if isinstance(k, ast.Constant)}
    raise AssertionError("tests/test_conformance.py has no DOORS registry")


def test_public_doors_finder_sees_the_doors_we_know() -> None:
    doors = public_doors()
    for name in ("open_dataset", "open_mfdataset", "open_catalog", "open_catalog_grids",
                 "open_stac", "read_chips", "torch.ChipDataset", ".rumi.chips",
                 "RumiBackendEntrypoint"):
        assert name in doors, name
    assert "to_rumi" not in doors and ".rumi.explain" not in doors


def test_every_public_door_is_in_the_conformance_matrix() -> None:
    rows = matrix_doors()
    missing = {name: [r for r in need if r not in rows]
               for name, need in public_doors().items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, (
        f"public doors missing from DOORS in tests/test_conformance.py: {missing}; add a "
        f"row (or, for a name that reads no data, a reason in NOT_DOORS)")
    stale = set(NOT_DOORS) - {*_literal_all(PACKAGE / "__init__.py"),
                              *(f"torch.{n}" for n in _literal_all(PACKAGE / "torch.py")),
                              ".rumi.explain", ".rumi.explain_chips", ".rumi.explore",
                              ".rumi.to_rumi"}
    assert not stale, f"NOT_DOORS names no public function: {stale}"
