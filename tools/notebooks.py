"""Execute the notebooks under ``notebooks/`` headless: one helper for the tests and the docs.

``tests/test_notebooks.py`` executes every notebook and keeps the executed copy
under ``build/notebooks/<name>/<name>.executed.ipynb``; ``make docs`` renders
that copy when it is current (:func:`current_execution`) and executes the
notebook itself otherwise, with the same kernel and environment, so CI runs
each notebook once.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
EXECUTED_DIR = ROOT / "build" / "notebooks"
KERNEL = "python3"
#: Seconds one cell may run (the longest, data generation, takes ~15 s on two busy cores).
CELL_TIMEOUT = 300


def kernel_env(workdir: Path) -> dict[str, str]:
    """Return the kernel's environment: this one, headless, with the working folder."""
    return {**os.environ, "MPLBACKEND": "Agg", "RUMI_NOTEBOOK_DIR": str(workdir)}


def execute(nb: nbformat.NotebookNode, workdir: Path) -> nbformat.NotebookNode:
    """Execute ``nb`` in place in a fresh kernel started in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute(env=kernel_env(workdir))
    return nb


def figures(nb: nbformat.NotebookNode) -> dict[str, bytes]:
    """Return every image/png output of an executed notebook, named by cell id."""
    out: dict[str, bytes] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        images = [o["data"]["image/png"] for o in cell.get("outputs", [])
                  if "image/png" in o.get("data", {})]
        name = cell.get("id") or f"cell{index:02d}"
        for k, image in enumerate(images):
            out[name if len(images) == 1 else f"{name}-{k + 1}"] = base64.b64decode(image)
    return out


def executed_path(name: str) -> Path:
    """Return where the tests keep the executed copy of notebook ``name`` (a stem)."""
    return EXECUTED_DIR / name / f"{name}.executed.ipynb"


def _code(nb: nbformat.NotebookNode) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def current_execution(source: Path) -> nbformat.NotebookNode | None:
    """Return the tests' executed copy of ``source`` if it is current, else None.

    Current: its code cells are the notebook's, every code cell ran, and it is
    newer than the notebook and than every file of the package it exercises.
    """
    path = executed_path(source.stem)
    if not path.is_file():
        return None
    executed = nbformat.read(path, as_version=4)
    if _code(executed) != _code(nbformat.read(source, as_version=4)):
        return None
    if any(c.cell_type == "code" and c.execution_count is None for c in executed.cells):
        return None
    newest = max(p.stat().st_mtime for p in [source, *(ROOT / "rumi_xarray").rglob("*.py")])
    return executed if path.stat().st_mtime >= newest else None
