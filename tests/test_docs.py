"""The documentation site's generators and its checker (issue 24).

``.ci/run`` builds the whole site (``make docs``, warnings as errors) and checks
the built pages; these tests pin what the generators promise, fast enough for
``make test``: new public names and README sections appear without editing the
docs, benchmark pages cite their results file, command and machine, notebook
executions from ``make test`` are reused only when current, and the checker
fails on a page whose figures are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
from PIL import Image

import rumi_xarray
from tools import check_docs, notebooks

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from rumi_docs import api, benchmarks, readme  # noqa: E402


def test_readme_sections_go_to_their_page_or_a_page_of_their_own(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(
        "# x\n\nfirst screen\n\n## What it is\n\ntour\n\n"
        "## Chips for models (torch)\n\n`rx.read_chips(...)`, see [the bench](benchmarks/x.md)"
        " and [xarray](https://docs.xarray.dev).\n\n"
        "## Compliance checks\n\nCF checker.\n\n## Documentation\n\nlinks\n")
    docs = tmp_path / "docs"
    readme.write(tmp_path, docs)
    out = docs / "guide" / "readme"
    chips = (out / "_ml-chips.md").read_text()
    assert chips.startswith("## Chips for models (torch)")
    # A README-relative link would be a broken reference on a docs page: it becomes text.
    assert "the bench (`benchmarks/x.md`)" in chips
    assert "[xarray](https://docs.xarray.dev)" in chips
    page = (out / "readme-compliance-checks.md").read_text()
    assert page.startswith("# Compliance checks") and "CF checker." in page
    assert "readme/readme-compliance-checks" in (out / "_toc.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        "_ml-chips.md", "_toc.md", "readme-compliance-checks.md"]


def test_this_readme_keeps_only_its_tour_and_links() -> None:
    titles = [t for t, _ in readme.sections((ROOT / "README.md").read_text())]
    assert set(titles) <= readme.KEPT | {"Install"}, titles
    assert "<!-- install:start -->" in (ROOT / "README.md").read_text()


def test_api_reference_covers_every_public_name(tmp_path: Path, monkeypatch) -> None:
    def brand_new_function() -> None:
        """Do something new."""

    monkeypatch.setattr(rumi_xarray, "brand_new_function", brand_new_function, raising=False)
    monkeypatch.setattr(rumi_xarray, "__all__", [*rumi_xarray.__all__, "brand_new_function"])
    api.write(ROOT, tmp_path)
    out = tmp_path / "api"
    index = (out / "index.md").read_text()
    for name in rumi_xarray.__all__:
        assert (out / "generated" / f"rumi_xarray.{name}.md").is_file(), name
        assert f"   {name}\n" in index, name
    # A name no group lists is not lost.
    assert "## More public names" in index
    assert index.index("brand_new_function") > index.index("## More public names")
    errors = (out / "errors.md").read_text()
    for name in rumi_xarray.__all__:
        obj = getattr(rumi_xarray, name)
        if isinstance(obj, type) and issubclass(obj, rumi_xarray.RumiError):
            assert f"`~rumi_xarray.{name}`" in errors, name
    assert "`~rumi_xarray.RumiIOError` (also `OSError`)" in errors
    assert "RumiDatasetAccessor" in (out / "accessor.md").read_text()
    assert ":func: build_parser" in (out / "cli.md").read_text()


def _results_copy(tmp_path: Path, leave_out: str | None = None) -> Path:
    target = tmp_path / "benchmarks" / "results"
    shutil.copytree(ROOT / "benchmarks" / "results", target)
    if leave_out:
        (target / leave_out).unlink()
    return tmp_path


def test_benchmark_pages_cite_results_command_and_machine(tmp_path: Path) -> None:
    # Pages of every benchmark; plots drawn for the quick ones (make docs draws them all and
    # tools/check_docs.py checks every page shows its plots).
    benchmarks.write(ROOT, tmp_path / "docs", draw=False)
    drawn = {"stac", "cluster", "open-speed"}
    benchmarks.write(ROOT, tmp_path / "drawn", only=drawn)
    for docs, names in ((tmp_path / "docs", set(benchmarks.PAGES)), (tmp_path / "drawn", drawn)):
        out = docs / "benchmarks" / "generated"
        assert {p.stem for p in out.glob("*.md")} == names
        for name in names:
            text = (out / f"{name}.md").read_text()
            assert "- results: `benchmarks/results/" in text, name
            assert "- command: `python benchmarks/" in text, name
            assert "- machine: " in text and "CPUs" in text, name
            figures = [line.split()[1] for line in text.splitlines()
                       if line.startswith("```{figure}")]
            assert figures, name
            if docs.name == "drawn":
                for figure in figures:
                    image = np.asarray(Image.open(out / figure).convert("RGB"))
                    assert image.shape[0] > 200
                    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 20


def test_numbers_on_the_run_page_come_from_its_results_file(tmp_path: Path) -> None:
    # The page's text quotes only the cube's spec, read from the file: change the file and
    # the page changes with it.
    root = _results_copy(tmp_path)
    path = root / "benchmarks" / "results" / "latest-final.json"
    data = json.loads(path.read_text())
    data["meta"]["spec"]["times"] = 97
    data["meta"]["cpus"] = 13
    path.write_text(json.dumps(data))
    benchmarks.write(root, root / "docs", only={"run"}, draw=False)
    text = (root / "docs" / "benchmarks" / "generated" / "run.md").read_text()
    assert "97 dates" in text and "13 CPUs" in text


def test_a_missing_results_file_leaves_its_page_out(tmp_path: Path) -> None:
    root = _results_copy(tmp_path, leave_out="latest-stac.txt")
    benchmarks.write(root, root / "docs", only={"stac", "cluster"}, draw=False)
    pages = {p.stem for p in (root / "docs" / "benchmarks" / "generated").glob("*.md")}
    assert pages == {"cluster"}


def _notebook(code: list[str], executed: bool) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\n\nWhat it shows.")]
    for k, source in enumerate(code):
        cell = nbformat.v4.new_code_cell(source)
        if executed:
            cell.execution_count = k + 1
        nb.cells.append(cell)
    return nb


def test_docs_reuse_only_a_current_execution_keyed_by_content(tmp_path: Path,
                                                               monkeypatch) -> None:
    # A tree of its own: the package's modules and the lock are inputs of the key.
    monkeypatch.setattr(notebooks, "ROOT", tmp_path)
    monkeypatch.setattr(notebooks, "EXECUTED_DIR", tmp_path / "executed")
    module = tmp_path / "rumi_xarray" / "sub" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("A = 1\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "lock.txt").write_text("numpy==2.0\n")
    source = tmp_path / "demo.ipynb"
    nbformat.write(_notebook(["x = 1", "print(x)"], executed=False), source)
    assert notebooks.current_execution(source) is None  # none yet
    copy = notebooks.save_execution(_notebook(["x = 1", "print(x)"], executed=True), source)
    assert copy == notebooks.executed_path("demo") and copy.is_file()
    assert notebooks.current_execution(source) is not None
    # File times do not matter (a fresh clone or a checkout changes them all) ...
    old = time.time() - 10 * 365 * 86400
    os.utime(copy, (old, old))
    assert notebooks.current_execution(source) is not None
    # ... nor does prose: the reused copy shows the notebook's new markdown.
    edited = _notebook(["x = 1", "print(x)"], executed=False)
    edited.cells[0].source = "# New title\n\nNew words."
    nbformat.write(edited, source)
    reused = notebooks.current_execution(source)
    assert reused is not None and reused.cells[0].source.startswith("# New title")
    # A changed package module or lock: stale.
    module.write_text("A = 2\n")
    assert notebooks.current_execution(source) is None
    notebooks.save_execution(_notebook(["x = 1", "print(x)"], executed=True), source)
    assert notebooks.current_execution(source) is not None
    (tmp_path / "requirements" / "lock.txt").write_text("numpy==2.1\n")
    assert notebooks.current_execution(source) is None
    # Other code than the notebook's: stale.
    notebooks.save_execution(_notebook(["x = 1", "print(x)"], executed=True), source)
    nbformat.write(_notebook(["x = 2", "print(x)"], executed=False), source)
    assert notebooks.current_execution(source) is None
    # A cell that never ran: stale.
    nb = _notebook(["x = 2", "print(x)"], executed=True)
    nb.cells[-1].execution_count = None
    notebooks.save_execution(nb, source)
    assert notebooks.current_execution(source) is None


def _png(path: Path, colourful_rows: int) -> None:
    image = np.full((1000, 600, 3), 255, dtype=np.uint8)
    image[100:140:4, 50:550] = 40  # lines of "text"
    image[150:152, 50:90] = (200, 30, 120)  # a coloured link
    if colourful_rows:
        rng = np.random.default_rng(0)
        image[400:400 + colourful_rows, 50:550] = rng.integers(0, 255, (colourful_rows, 500, 3))
        image[400:400 + colourful_rows, 50:550, 0] = 230  # saturated
        image[400:400 + colourful_rows, 50:550, 1:] //= 4
    Image.fromarray(image).save(path)


def test_screenshot_check_tells_a_figure_from_text(tmp_path: Path) -> None:
    _png(tmp_path / "text.png", 0)
    _png(tmp_path / "figure.png", 300)
    assert check_docs.figure_bands(tmp_path / "text.png")[0] == 0
    assert check_docs.figure_bands(tmp_path / "figure.png")[0] >= 1


def _site(tmp_path: Path, shown: int, figures: int) -> tuple[Path, Path]:
    site, nbs = tmp_path / "html", tmp_path / "notebooks"
    for folder in ("examples", "_images", "_sources/examples", "benchmarks/generated", "api"):
        (site / folder).mkdir(parents=True, exist_ok=True)
    nbs.mkdir()
    nbformat.write(_notebook(["plot()"], executed=False), nbs / "demo.ipynb")
    nb = _notebook(["plot()"], executed=True)
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBO"})
                           for _ in range(figures)]
    nbformat.write(nb, site / "_sources" / "examples" / "demo.ipynb.txt")
    for k in range(max(shown, figures)):
        (site / "_images" / f"fig{k}.png").write_bytes(b"png")
    (site / "_images" / "demo.png").write_bytes(b"png")
    (site / "_images" / "plot.png").write_bytes(b"png")
    thumb = '<img src="_images/demo.png">'
    (site / "index.html").write_text(f"<html>{thumb}</html>")
    (site / "examples" / "index.html").write_text('<img src="../_images/demo.png">')
    imgs = "".join(f'<img src="../_images/fig{k}.png">' for k in range(shown))
    (site / "examples" / "demo.html").write_text(f"<html>{imgs}</html>")
    (site / "benchmarks" / "generated" / "run.html").write_text(
        '<img src="../../_images/plot.png">')
    ids = "".join(f'<dt id="rumi_xarray.{n}"></dt>' for n in rumi_xarray.__all__)
    (site / "api" / "index.html").write_text(f"<html>{ids}</html>")
    return site, nbs


def test_site_check_passes_a_complete_site(tmp_path: Path) -> None:
    site, nbs = _site(tmp_path, shown=2, figures=2)
    assert check_docs.check_site(site, nbs) == []


@pytest.mark.parametrize("damage", ["figure", "thumbnail", "image file", "api name", "plot"])
def test_site_check_fails_a_site_missing_something(tmp_path: Path, damage: str) -> None:
    site, nbs = _site(tmp_path, shown=1 if damage == "figure" else 2, figures=2)
    if damage == "thumbnail":
        (site / "examples" / "index.html").write_text("<html></html>")
    elif damage == "image file":
        (site / "_images" / "fig1.png").unlink()
    elif damage == "api name":
        (site / "api" / "index.html").write_text('<dt id="rumi_xarray.open_dataset"></dt>')
    elif damage == "plot":
        (site / "benchmarks" / "generated" / "run.html").write_text("<p>no plot</p>")
    problems = check_docs.check_site(site, nbs)
    expected = {"figure": "shows 1 images, its executed notebook has 2 figures",
                "thumbnail": "the gallery has no thumbnail of demo.ipynb",
                "image file": "image ../_images/fig1.png is missing or empty",
                "api name": "rumi_xarray.to_rumi is not documented",
                "plot": "run.html shows no plot"}[damage]
    assert any(expected in p for p in problems), problems
