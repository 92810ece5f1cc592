"""Execute the notebooks under ``notebooks/`` headless: one helper for the tests and the docs.

``tests/test_notebooks.py`` executes every notebook and keeps the executed copy
under ``build/notebooks/<name>/<name>.executed.ipynb`` (:func:`save_execution`);
``make docs`` renders that copy when it is current (:func:`current_execution`)
and otherwise executes the notebook itself, with the same kernel and
environment, and keeps that copy the same way. So CI runs each notebook once,
and a second ``make docs`` executes nothing that has not changed.

Current means keyed by content, not by file times (a fresh clone or a checkout
gives every file a new time): :func:`execution_key` hashes the notebook's code
cells, every module of the package, this helper and the lock of installed
versions, and the executed copy carries the key it was made with.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
EXECUTED_DIR = ROOT / "build" / "notebooks"
KERNEL = "python3"
#: Metadata entry of an executed copy holding the :func:`execution_key` it was made with.
KEY_FIELD = "rumi_execution_key"
#: Files whose content an execution depends on besides the notebook's code: the package,
#: this helper (kernel, environment) and the versions installed (the lock).
INPUTS = ("rumi_xarray/**/*.py", "tools/notebooks.py", "requirements/lock.txt")
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


def execution_key(source: Path) -> str:
    """Return the hash of everything an execution of notebook ``source`` depends on.

    The code cells of ``source`` and the content of every file of :data:`INPUTS`
    (names and bytes, in sorted order); markdown edits do not change it.
    """
    digest = hashlib.sha256()
    for cell_source in _code(nbformat.read(source, as_version=4)):
        digest.update(cell_source.encode() + b"\0")
    files = sorted({p for pattern in INPUTS for p in ROOT.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def save_execution(nb: nbformat.NotebookNode, source: Path) -> Path:
    """Keep ``nb``, ``source`` executed, where :func:`current_execution` finds it.

    Returns the path written, :func:`executed_path` of the notebook.
    """
    path = executed_path(source.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    nb.metadata[KEY_FIELD] = execution_key(source)
    nbformat.write(nb, path)
    return path


def current_execution(source: Path) -> nbformat.NotebookNode | None:
    """Return the kept executed copy of ``source`` if it is current, else None.

    Current: it was made with this :func:`execution_key` of the notebook (same
    code cells, package, helper and installed versions) and every code cell ran.
    Markdown cells are taken from ``source``, so a prose edit needs no execution.
    """
    path = executed_path(source.stem)
    if not path.is_file():
        return None
    executed = nbformat.read(path, as_version=4)
    if executed.metadata.get(KEY_FIELD) != execution_key(source):
        return None
    if any(c.cell_type == "code" and c.execution_count is None for c in executed.cells):
        return None
    fresh = nbformat.read(source, as_version=4)
    if len(fresh.cells) != len(executed.cells):
        return None
    for cell, ran in zip(fresh.cells, executed.cells, strict=True):
        if cell.cell_type != ran.cell_type:
            return None
        if cell.cell_type != "code":
            ran.source = cell.source
    return executed
