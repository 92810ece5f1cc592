"""The API reference: generated from ``rumi_xarray.__all__``, the accessors and the errors.

Each public name gets a page of its own (autodoc + numpydoc) and a row in the
summary table of its group; a name no group lists lands in "More public names",
so a name added to ``__all__`` is documented without editing this file (and a
name without a docstring fails the build through numpydoc's GL08 check).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import shutil
from pathlib import Path

import xarray as xr

import rumi_xarray
from rumi_xarray import errors

#: Summary groups, in page order: title, one line, the names (missing ones are skipped).
GROUPS = [
    ("Opening files and URLs", "One file, lazily or with dask.",
     ["open_dataset", "overview_factors", "RumiBackendEntrypoint"]),
    ("Many scenes", "Catalog tables and cubes of many files.",
     ["catalog", "open_catalog", "open_mfdataset"]),
    ("STAC", "Items out, loads in.", ["to_stac", "open_stac"]),
    ("Models", "Chips for machine learning.", ["read_chips"]),
    ("Writing", "Rumi files from xarray objects.", ["to_rumi", "write_array"]),
    ("Inspecting reads", "What a read will cost and what it did.",
     ["explain", "Explanation", "stats", "cache_info", "clear_cache"]),
    ("Settings", "The one settings registry.", ["set_options", "get_options"]),
]
#: Modules whose functions are public beyond ``rumi_xarray.__all__`` (documented when the
#: module exists: ``rumi_xarray.torch`` comes with the chips extra).
PUBLIC_MODULES = ["rumi_xarray.stac.geoparquet", "rumi_xarray.torch"]


def _stub(name: str, obj: object) -> str:
    if isinstance(obj, type) and issubclass(obj, BaseException):
        directive = ".. autoexception:: {}\n   :show-inheritance:\n"
    elif isinstance(obj, type):
        directive = ".. autoclass:: {}\n   :members:\n   :show-inheritance:\n"
    else:
        directive = ".. autofunction:: {}\n"
    return (f"# rumi_xarray.{name}\n\n```{{eval-rst}}\n.. currentmodule:: rumi_xarray\n\n"
            + directive.format(name) + "```\n")


def _table(names: list[str]) -> str:
    rows = "\n".join(f"   {n}" for n in names)
    return f"```{{eval-rst}}\n.. currentmodule:: rumi_xarray\n\n.. autosummary::\n\n{rows}\n```\n"


def _toctree(entries: list[str]) -> str:
    return "```{toctree}\n:hidden:\n\n" + "\n".join(entries) + "\n```\n"


def error_tree() -> str:
    """Return the error hierarchy as nested Markdown bullets, builtin bases named."""
    classes = [c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.RumiError)]

    def lines(cls: type, depth: int) -> list[str]:
        builtin = [b.__name__ for b in cls.__mro__[1:]
                   if b.__module__ == "builtins" and b not in (Exception, BaseException, object)]
        also = f" (also {', '.join(f'`{b}`' for b in builtin)})" if builtin else ""
        summary = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        out = [f"{'  ' * depth}- {{class}}`~rumi_xarray.{cls.__name__}`{also}: {summary}"]
        for sub in sorted((c for c in classes if cls in c.__bases__), key=lambda c: c.__name__):
            out += lines(sub, depth + 1)
        return out

    return "\n".join(lines(errors.RumiError, 0)) + "\n"


def accessors() -> list[tuple[str, type]]:
    """Return ``(xarray type name, accessor class)`` of every accessor rumi_xarray registers."""
    found = []
    for owner in (xr.Dataset, xr.DataArray, getattr(xr, "DataTree", None)):
        if owner is None:
            continue
        for attr, value in vars(owner).items():
            cls = getattr(value, "_accessor", None)
            if isinstance(cls, type) and cls.__module__.startswith("rumi_xarray."):
                found.append((f"{owner.__name__}.{attr}", cls))
    return found


def _module_page(module_name: str) -> str | None:
    if importlib.util.find_spec(module_name) is None:
        return None
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [
        n for n, v in vars(module).items() if not n.startswith("_")
        and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == module_name]
    body = "\n".join(f".. autofunction:: {n}" if callable(getattr(module, n))
                     and not isinstance(getattr(module, n), type)
                     else f".. autoclass:: {n}\n   :members:" for n in sorted(names))
    return (f"# {module_name}\n\n```{{eval-rst}}\n.. automodule:: {module_name}\n"
            f"   :no-members:\n\n.. currentmodule:: {module_name}\n\n{body}\n```\n")


def write(root: Path, docs: Path) -> None:
    """Write ``api/`` under ``docs``."""
    out = docs / "api"
    shutil.rmtree(out, ignore_errors=True)
    (out / "generated").mkdir(parents=True)
    public = list(rumi_xarray.__all__)
    error_names = [n for n in public if isinstance(getattr(rumi_xarray, n), type)
                   and issubclass(getattr(rumi_xarray, n), errors.RumiError)]
    grouped = {n for _, _, names in GROUPS for n in names} | set(error_names)
    groups = [(t, d, [n for n in names if n in public]) for t, d, names in GROUPS]
    other = sorted(n for n in public if n not in grouped)
    if other:
        groups.append(("More public names", "Also in `rumi_xarray.__all__`.", other))

    for name in public:
        (out / "generated" / f"rumi_xarray.{name}.md").write_text(
            _stub(name, getattr(rumi_xarray, name)))

    page = ["# API reference\n",
            "Everything in `rumi_xarray.__all__` (`import rumi_xarray as rx`), the `.rumi` "
            "accessor, the errors and the `rumi-xarray` command line. Most users need only "
            "`xr.open_dataset(..., engine=\"rumi\")`: these are the functions that add to it.\n"]
    for title, line, names in groups:
        if names:
            page += [f"## {title}\n", f"{line}\n", _table(names)]
    page += ["## Accessor\n", "[`ds.rumi` and `da.rumi`](accessor.md): layout facts, "
             "`explain()` and `to_rumi()` on objects opened with rumi_xarray.\n",
             "## Errors\n", "[The error hierarchy](errors.md): every error is an "
             "`rx.RumiError` and also the builtin type code already catches.\n",
             _table(error_names)]
    modules = []
    for module_name in PUBLIC_MODULES:
        text = _module_page(module_name)
        if text is not None:
            (out / f"{module_name}.md").write_text(text)
            modules.append(module_name)
    if modules:
        page += ["## Modules\n"] + [f"- [`{m}`]({m}.md)\n" for m in modules]
    page += ["## Command line\n", "[`rumi-xarray`](cli.md) and its subcommands.\n",
             _toctree(["accessor", "errors", "cli", *modules]
                      + [f"generated/rumi_xarray.{n}" for n in public])]
    (out / "index.md").write_text("\n".join(page))

    acc = ["# The `.rumi` accessor\n",
           "Registered on import of `rumi_xarray` (and by `engine=\"rumi\"`) for objects "
           "opened with rumi_xarray.\n"]
    for label, cls in accessors():
        acc += [f"## `{label}`\n", "```{eval-rst}\n"
                f".. autoclass:: {cls.__module__}.{cls.__qualname__}\n"
                "   :members:\n   :inherited-members:\n```\n"]
    (out / "accessor.md").write_text("\n".join(acc))

    (out / "errors.md").write_text(
        "# Errors\n\n```{eval-rst}\n.. automodule:: rumi_xarray.errors\n   :no-members:\n```\n\n"
        "Every class below is importable from `rumi_xarray`; the tree is drawn from the "
        "classes themselves.\n\n" + error_tree())

    (out / "cli.md").write_text(
        "# Command line: `rumi-xarray`\n\nGenerated from the parser the command runs "
        "(`rumi_xarray.cli.main.build_parser`). `python -m rumi_xarray` is the same "
        "command.\n\n```{eval-rst}\n.. argparse::\n   :module: rumi_xarray.cli.main\n"
        "   :func: build_parser\n   :prog: rumi-xarray\n```\n")
