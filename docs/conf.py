"""Sphinx configuration of the rumi_xarray documentation (issue 24).

``make docs`` builds it with warnings as errors and nitpicky references, so a
broken cross-reference or a public name without a docstring fails the build.
Pages that follow the code are generated at build time into ``_generated/``
(see ``_ext/``): the API reference from ``rumi_xarray.__all__``, the error
hierarchy from the classes, the example gallery from the executed notebooks,
the benchmark pages and their plots from ``benchmarks/results/``, and pages
for README sections no guide page claims yet.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# The package from this tree (not another installed copy) and our extensions.
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

import rumi_xarray  # noqa: E402

project = "rumi_xarray"
author = "the rumi_xarray developers"
copyright = "the rumi_xarray developers"
release = rumi_xarray.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
    "sphinxarg.ext",
    "sphinx_design",
    "rumi_docs",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "**/_*.md"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["rumi.css"]

html_theme = "pydata_sphinx_theme"
html_title = "rumi_xarray"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"index": []}
html_show_sourcelink = False

# References: every one of ours must resolve (nitpicky). There is no network here for
# intersphinx, so names of other libraries in signatures and docstrings are left as text.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(xarray|xr|numpy|np|dask|pandas|pd|pystac|pyarrow|odc|fsspec|torch|"
               r"distributed|argparse|collections|os|pathlib|datetime|typing|"
               r"concurrent|asyncio|types|rumi|geozl|pyproj|affine|rasterio)(\..*)?"),
    # Python builtins and typing names that numpydoc and autodoc write as references.
    (r"py:.*", r"(int|float|str|bytes|bool|None|dict|list|tuple|set|object|type|"
               r"Exception|BaseException|OSError|ValueError|TypeError|KeyError|IndexError|"
               r"RuntimeError|MemoryError|NotImplementedError|FileNotFoundError|"
               r"Any|Callable|Iterable|Iterator|Mapping|Sequence|Hashable|Literal|Self|"
               r"optional|default|array_like|array-like|path-like|callable|iterable|"
               r"mapping|sequence|file-like|ndarray|DataArray|Dataset|DataTree)"),
]

autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # numpydoc's Parameters sections give the types
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_class_members_toctree = False
# A public name without a docstring fails the build (GL08: "has no docstring").
numpydoc_validation_checks = {"GL08"}

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# Notebooks are executed by the rumi_docs extension (reusing `make test`'s executed copies
# when they are current); myst-nb renders them as they are.
nb_execution_mode = "off"
nb_merge_streams = True
suppress_warnings = ["myst.header"]
