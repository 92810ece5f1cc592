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
import re
import shutil
import sys
import time
import warnings
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


# --- every Python block of the README and the user guide runs ---------------------------
#
# The blocks of one page run in order in one namespace, as a reader runs them in one
# session, in a folder holding the files they name (``doc_data``): ``scene.rumi`` and
# ``cube.rumi`` (a demo series of 4 Sentinel-2-like bands), ``scenes/`` (one file a date),
# ``land_cover.rumi``, ``catalog.parquet`` and ``items.parquet``; ``s3://bucket/`` holds
# ``cube.rumi``, ``tile/*.rumi`` and ``catalog/`` on a moto S3 server the environment points
# at, as MinIO settings would. A block that cannot run standalone is marked just above its
# fence with ``<!-- not-run: why -->``; the test lists the reason instead of running it.

DOC_PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md",
             *sorted((ROOT / "docs" / "guide").glob("*.md"))]
NOT_RUN = "<!-- not-run:"


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """Return each ```` ```python ```` block of a Markdown page: (line, code, not-run reason)."""
    blocks: list[tuple[int, str, str | None]] = []
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        if lines[k].strip() == "```python":
            start = k + 1
            end = start
            while lines[end].strip() != "```":
                end += 1
            before = lines[k - 1].strip() if k else ""
            reason = None
            if before.startswith(NOT_RUN):
                reason = before[len(NOT_RUN):].removesuffix("-->").strip()
            blocks.append((start + 1, "\n".join(lines[start:end]), reason))
            k = end
        k += 1
    return blocks


def test_python_blocks_are_found_with_their_marks() -> None:
    page = ("# t\n\n```python\nx = 1\n```\n\n<!-- not-run: needs a GPU -->\n```python\n"
            "y = 2\n```\n\n```\nshell\n```\n")
    assert python_blocks(page) == [(4, "x = 1", None), (9, "y = 2", "needs a GPU")]


@pytest.fixture(scope="module")
def doc_data(tmp_path_factory: pytest.TempPathFactory, s3_server_session) -> Path:
    """The files the README and the guide name, written once (about 2 s)."""
    from rumi_xarray.demo import ndvi, synthetic

    root = tmp_path_factory.mktemp("doc-data")
    scene = synthetic.scene_series(4, 128)
    paths = ndvi._demo_write(scene, str(root), 2024, 64)
    for source, name in ((paths["series"], "scene.rumi"), (paths["series"], "cube.rumi"),
                         (paths["land_cover"], "land_cover.rumi")):
        for suffix in ("", ".aux.json"):
            if Path(source + suffix).exists():
                shutil.copy(source + suffix, str(root / name) + suffix)
    table = rumi_xarray.catalog(sorted(str(p) for p in (root / "scenes").glob("*.rumi")))
    table.to_parquet(root / "catalog.parquet")
    from rumi_xarray.stac import geoparquet

    geoparquet.write_geoparquet(rumi_xarray.to_stac(table), root / "items.parquet")
    server = s3_server_session
    server.upload("bucket", *sorted(root.glob("cube.rumi*")))
    for scene_path in sorted((root / "scenes").iterdir()):
        server.upload("bucket", scene_path, prefix="tile/")
    with pytest.MonkeyPatch.context() as patch:
        _point_at(server, patch)
        rumi_xarray.catalog("s3://bucket/tile/*.rumi").to_parquet(root / "remote.parquet")
    server.upload("bucket", root / "remote.parquet", prefix="catalog/")
    return root


def _point_at(server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point librumi and s3fs at ``server`` as a MinIO user would: through the environment."""
    from tests.servers import S3_ENV_TO_UNSET

    for name in S3_ENV_TO_UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", DOC_PAGES, ids=_page_id)
def test_every_python_block_of_the_page_runs(page: Path, doc_data: Path, tmp_path: Path,
                                             s3_server_session,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _point_at(s3_server_session, monkeypatch)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for item in doc_data.iterdir():
        (tmp_path / item.name).symlink_to(item)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc__"}
    not_run = []
    text = page.read_text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for line, code, reason in python_blocks(text):
            if reason is not None:
                assert reason, f"{_page_id(page)}:{line}: a not-run block must say why"
                not_run.append(f"{_page_id(page)}:{line}: {reason}")
                continue
            try:
                exec(compile(code, f"{_page_id(page)}:{line}", "exec"), namespace)
            except Exception as error:
                raise AssertionError(f"the block at {_page_id(page)}:{line} fails: "
                                     f"{error!r}") from error
    # A warning the user sees running the page's code is one the page tells them about:
    # its message holds a phrase the page quotes. Deprecations inside libraries are not
    # shown to users by Python's default filters (only those their own code triggers).
    quoted = [" ".join(q.split()) for q in re.findall(r'"([^"`]{12,})"', text)]
    hidden = DeprecationWarning | PendingDeprecationWarning
    shown = [w for w in caught if not (issubclass(w.category, hidden)
                                       and not w.filename.startswith(_page_id(page)))]
    unexplained = sorted({f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
                          for w in shown
                          if not any(q in " ".join(str(w.message).split()) for q in quoted)})
    assert not unexplained, f"{_page_id(page)} runs into warnings it does not explain: " \
                            f"{unexplained}"
    for entry in not_run:
        print("not run:", entry)


# --- the pages speak to users ----------------------------------------------------------

#: What only the tracker or the history means: "issue 23", "issue #7", commit hashes
#: (7 to 40 hex digits holding a digit and a letter), acceptance targets.
TRACKER_WORDS = re.compile(r"\bissues?[ #]+\d+|\bacceptance\b|\[MET\]|\bbars? of\b|\bthe bar\b"
                           r"|\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
                           re.IGNORECASE)


def user_pages() -> dict[str, str]:
    """Return the README, every hand-written docs page and the notebooks' Markdown cells."""
    pages = {"README.md": (ROOT / "README.md").read_text()}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if "_build" not in page.parts and "generated" not in page.parts \
                and "readme" not in page.parts:
            pages[str(page.relative_to(ROOT))] = page.read_text()
    for book in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(book, as_version=4).cells
        pages[str(book.relative_to(ROOT))] = "\n".join(
            c.source for c in cells if c.cell_type == "markdown")
    return pages


def test_tracker_words_are_caught() -> None:
    for text in ("as issue 23 asked", "see issue #7", "at commit 3ce650a", "acceptance target",
                 "the bar is 2x"):
        assert TRACKER_WORDS.search(text), text
    for text in ("`latest-tile-chunks.md`", "EPSG:32633", "a decade", "2048² cube", "facade"):
        assert not TRACKER_WORDS.search(text), text


@pytest.mark.parametrize("name", sorted(user_pages()))
def test_pages_name_no_issue_commit_or_target(name: str) -> None:
    text = user_pages()[name]
    found = [m.group(0) for m in TRACKER_WORDS.finditer(text)]
    assert not found, f"{name} speaks of the tracker or history: {found}"


def test_built_benchmark_pages_name_no_commit(tmp_path: Path) -> None:
    benchmarks.write(ROOT, tmp_path / "docs", draw=False)
    for page in (tmp_path / "docs" / "benchmarks" / "generated").glob("*.md"):
        text = page.read_text()
        assert ":lines: 2-" in text, page.name  # the report's first line names the commit
        found = [m.group(0) for m in TRACKER_WORDS.finditer(text)]
        assert not found, (page.name, found)


def test_gallery_offers_every_notebook_for_download() -> None:
    from rumi_docs import gallery

    entries = [("quickstart", "Quickstart", "Open a file."), ("ml_chips", "Chips", "Train.")]
    page = gallery.index_page(entries)
    for name, _, _ in entries:
        assert f"{{download}}`{name}.ipynb <{name}.ipynb>`" in page
        assert f"<{name}.ipynb>`" in gallery.download_cell(name).source
    assert page.index("## Downloads") > page.index(":::{grid-item-card} Chips")


# --- docstring examples run as doctests ------------------------------------------------


def public_objects() -> dict[str, object]:
    """Return every public function and class (not the errors), the accessor's methods and
    ``rumi_xarray.torch``'s names, by the name users call them."""
    import rumi_xarray.torch as rx_torch
    from rumi_xarray.backend.accessor import RumiDataArrayAccessor

    found: dict[str, object] = {}
    for name in rumi_xarray.__all__:
        obj = getattr(rumi_xarray, name)
        if not (isinstance(obj, type) and issubclass(obj, Exception)):
            found[f"rumi_xarray.{name}"] = obj
    for name in ("explain", "chips", "explain_chips", "explore", "to_rumi"):
        found[f".rumi.{name}"] = getattr(RumiDataArrayAccessor, name)
    for name in rx_torch.__all__:
        found[f"rumi_xarray.torch.{name}"] = getattr(rx_torch, name)
    return found


def test_every_public_name_has_examples() -> None:
    import inspect

    missing = [name for name, obj in public_objects().items()
               if not re.search(r"Examples\n\s*--------\n(.|\n)*>>> ", inspect.getdoc(obj) or "")]
    assert not missing, f"no Examples section with code: {missing}"


@pytest.mark.parametrize("name", sorted(public_objects()))
def test_docstring_examples_run(name: str, doc_data: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The examples name the files doc_data writes (scene.rumi, scenes/, catalog.parquet...).
    import doctest

    import xarray as xr

    for item in doc_data.iterdir():
        (tmp_path / item.name).symlink_to(item)
    monkeypatch.chdir(tmp_path)
    obj = public_objects()[name]
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(obj, name, globs={"xr": xr, "np": np, "rx": rumi_xarray})
    assert tests and tests[0].examples, name
    report: list[str] = []  # doctest swaps sys.stdout while it runs: collect, do not print
    for test in tests:
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_explain_shows_its_sentence_in_notebooks(doc_data: Path) -> None:
    import html

    import xarray as xr
    from IPython.core.formatters import DisplayFormatter

    cost = xr.open_dataset(doc_data / "scene.rumi", engine="rumi").rumi.explain()
    shown, _ = DisplayFormatter().format(cost)  # what Jupyter puts in the cell's output
    sentence = str(cost)
    assert sentence.startswith("1 native read call(s), 1 window(s), 64 frame(s): ")
    assert shown["text/plain"] == sentence
    assert shown["text/html"] == f"<pre>{html.escape(sentence)}</pre>"
    assert "Explanation(" in repr(cost)  # repr keeps the fields, for debugging
