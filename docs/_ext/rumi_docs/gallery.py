"""The examples: every notebook executed, with its figures, and a gallery of thumbnails.

A notebook's executed copy from ``make test`` (``tests/test_notebooks.py``) or
from an earlier build is used when it is current (keyed by the content of its
code, the package and the lock: ``tools/notebooks.py``); otherwise the notebook
is executed here by the same helper and that copy is kept for the next build,
so CI runs each notebook once. myst-nb renders the executed notebooks as they are.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from PIL import Image
from sphinx.util import logging

from tools import notebooks

LOG = logging.getLogger(__name__)
THUMBNAIL_WIDTH = 480


def _title_and_summary(nb: nbformat.NotebookNode, fallback: str) -> tuple[str, str]:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"(?m)^# (.+)$", cell.source)
            if match:
                rest = cell.source[match.end():].strip().split("\n\n")[0]
                sentence = re.split(r"(?<=\.)\s", rest.replace("\n", " "), maxsplit=1)[0]
                return match.group(1).strip(), sentence
    return fallback, ""


def thumbnail(png: bytes) -> bytes:
    """Return ``png`` scaled to the gallery's width."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    height = round(image.height * THUMBNAIL_WIDTH / image.width)
    out = io.BytesIO()
    image.resize((THUMBNAIL_WIDTH, height), Image.Resampling.LANCZOS).save(out, "PNG")
    return out.getvalue()


def executed(source: Path) -> nbformat.NotebookNode:
    """Return ``source`` executed: the tests' current copy, or a fresh execution."""
    nb = notebooks.current_execution(source)
    if nb is not None:
        LOG.info("rumi_docs: %s: reusing %s", source.name,
                 notebooks.executed_path(source.stem).relative_to(notebooks.ROOT))
        return nb
    LOG.info("rumi_docs: %s: executing (no current copy from make test or a build)",
             source.name)
    nb = nbformat.read(source, as_version=4)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"docs-{source.stem}-") as workdir:
        notebooks.execute(nb, Path(workdir))
    notebooks.save_execution(nb, source)
    LOG.info("rumi_docs: %s: executed in %.0f s", source.name, time.perf_counter() - start)
    return nb


def cards(entries: list[tuple[str, str, str]], prefix: str) -> str:
    """Return a sphinx-design grid of cards ``(name, title, summary)``; paths from ``prefix``."""
    out = ["::::{grid} 1 2 2 2\n:gutter: 3\n"]
    for name, title, summary in entries:
        out.append(f":::{{grid-item-card}} {title}\n:link: {prefix}{name}\n:link-type: doc\n"
                   f":img-top: {prefix}thumbnails/{name}.png\n:img-alt: {title}\n\n"
                   f"{summary}\n:::\n")
    out.append("::::\n")
    return "\n".join(out)


def write(root: Path, docs: Path) -> None:
    """Write ``examples/``: executed notebooks, thumbnails, the gallery page and its cards."""
    out = docs / "examples"
    shutil.rmtree(out, ignore_errors=True)
    (out / "thumbnails").mkdir(parents=True)
    entries = []
    sources = sorted(notebooks.NOTEBOOK_DIR.glob("*.ipynb"))
    # Notebooks that must run do so side by side, one kernel per core: on a fresh clone
    # they are most of the build's time, and each spends much of it single-threaded. The
    # largest start first (size stands in for run time), so a short one fills the gap.
    workers = max(1, min(len(sources), os.cpu_count() or 1))
    longest_first = sorted(sources, key=lambda p: p.stat().st_size, reverse=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        runs = dict(zip(longest_first, pool.map(executed, longest_first), strict=True))
    for source in sources:
        nb = runs[source]
        figures = notebooks.figures(nb)
        if not figures:
            raise RuntimeError(f"{source.name} shows no figure: the gallery needs one")
        page = nbformat.from_dict(nb)
        # The link goes under the title, so the page's title and summary stay the notebook's.
        page.cells.insert(1, download_cell(source.stem))
        nbformat.write(page, out / source.name)
        (out / "thumbnails" / f"{source.stem}.png").write_bytes(
            thumbnail(next(iter(figures.values()))))
        title, summary = _title_and_summary(nb, source.stem)
        entries.append((source.stem, title, summary))
    (out / "_cards.md").write_text(cards(entries, "/examples/"))
    (out / "index.md").write_text(index_page(entries))


def download_cell(name: str) -> nbformat.NotebookNode:
    """Return the Markdown cell that offers the notebook ``name`` for download on its page."""
    return nbformat.v4.new_markdown_cell(
        f"{{download}}`Download this notebook <{name}.ipynb>` (run it in Jupyter with the "
        "`notebooks` extra installed; it makes its own data).")


def index_page(entries: list[tuple[str, str, str]]) -> str:
    """Return the gallery page: the cards, a download link per notebook, the toctree."""
    downloads = "\n".join(f"- {{download}}`{name}.ipynb <{name}.ipynb>`: {title}"
                          for name, title, _ in entries)
    return ("# Examples\n\nNotebooks from `notebooks/`, executed when the site was built, with "
            "their output. Each runs on data it makes itself: download one and open it in "
            "Jupyter with the `notebooks` extra installed to run it yourself.\n\n"
            + cards(entries, "") + "\n## Downloads\n\n" + downloads + "\n"
            + "\n```{toctree}\n:hidden:\n\n" + "\n".join(n for n, _, _ in entries)
            + "\n```\n")
