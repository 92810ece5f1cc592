"""Execute every notebook under notebooks/ headless, each in a clean kernel of this venv.

Every figure a notebook shows is saved as a PNG under ``build/notebooks/<notebook>/``
(named after the cell id, so a reviewer can look at them) together with the executed
notebook. Notebooks write their files into the folder named by ``RUMI_NOTEBOOK_DIR``; the
pixel series the time-series notebook reads from its cube is checked again here against
``rumi.read`` of the same pixels.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import numpy as np
import pytest
import rumi
from jupyter_client.kernelspec import KernelSpecManager
from nbclient.exceptions import CellExecutionError
from PIL import Image

# The execution `make docs` reuses (and repeats when the tests' copies are not current).
from tools.notebooks import KERNEL, NOTEBOOK_DIR, executed_path, save_execution
from tools.notebooks import execute as _execute
from tools.notebooks import figures as _figures

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def on_its_worker(name: str) -> pytest.MarkDecorator:
    """Give notebook ``name`` a pytest-xdist group of its own: notebooks run side by side."""
    return pytest.mark.xdist_group(f"notebook-{name}")


#: The notebooks as parameters, each in its own xdist group (executed on one worker).
BY_NOTEBOOK = [pytest.param(p.stem, marks=on_its_worker(p.stem)) for p in NOTEBOOKS]
#: Seconds a whole notebook may take before the test fails (the suite's budget).
NOTEBOOK_BUDGET = 240
#: Figures each notebook must show, by cell id.
EXPECTED_FIGURES = {
    "quickstart": {"chip", "dask"},
    "ml_chips": {"loss", "prediction"},
    "explore": {"snapshot", "zoom"},
    "time_series_exploration": {"rgb-map", "ndvi-map", "locations", "pixel-series",
                                "climatology-maps", "climatology-curves", "cluster-means"},
}


class Run:
    """One executed notebook: its working folder, figures and wall time."""

    def __init__(self, path: Path, workdir: Path) -> None:
        self.name = path.stem
        self.workdir = workdir
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        _execute(nb, workdir)
        self.seconds = time.perf_counter() - start
        self.figures = _figures(nb)
        self.figure_dir = executed_path(self.name).parent
        shutil.rmtree(self.figure_dir, ignore_errors=True)
        self.figure_dir.mkdir(parents=True)
        for name, png in self.figures.items():
            (self.figure_dir / f"{name}.png").write_bytes(png)
        save_execution(nb, path)


def test_notebooks_are_present_and_stripped():
    assert {p.stem for p in NOTEBOOKS} >= set(EXPECTED_FIGURES)
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata["kernelspec"]["name"] == KERNEL, path.name
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (
                    f"{path.name} cell {cell.id} has outputs: strip them before committing")


def test_kernel_is_this_venv(tmp_path):
    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    # jupyter_client runs a bare "python"/"python3" argv[0] as sys.executable.
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info)}
    executable = sys.executable if spec.argv[0] in bare else spec.argv[0]
    assert Path(executable).parent == Path(sys.prefix) / "bin", spec.argv
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os, sys\nprint(sys.prefix)\n"
                                          "print(os.environ['MPLBACKEND'])")]
    _execute(nb, tmp_path)
    assert nb.cells[0].outputs[0]["text"].split() == [sys.prefix, "Agg"]


def check_pixel_series(run: Run) -> None:
    """The series the time-series notebook read equal ``rumi.read`` of the same pixels."""
    record = json.loads((run.workdir / "pixel_series.json").read_text())
    values = np.asarray(record["values"])
    points = list(record["points"].values())
    assert values.shape == (36, 4, len(points)) == (len(record["paths"]), 4, 4)
    assert record["times"] == sorted(record["times"])
    for t, path in enumerate(record["paths"]):
        header = rumi.info(source=path).header
        for p, (row, col) in enumerate(points):
            pixel = rumi.read(path, header, window=(row, col, 1, 1), pattern="t b y x")
            # The stored counts, decoded as the sidecar's scale 1e-4 says (float32).
            reflectance = pixel[0, :, 0, 0].astype(np.float32) * np.float32(1e-4)
            np.testing.assert_array_equal(values[t, :, p], reflectance,
                                          err_msg=f"{Path(path).name} pixel {(row, col)}")


def check_chip_model(run: Run) -> None:
    """The ML notebook's model, trained on chips with land-cover labels, beats chance.

    Chance is 25 %; far above it on a held-out date means labels and chips line up
    window for window.
    """
    record = json.loads((run.workdir / "chips_model.json").read_text())
    assert record["accuracy"] > 0.7, record["accuracy"]
    assert record["losses"][-1] < record["losses"][0]


def check_explorer_series(run: Run) -> None:
    """The series the explorer notebook's explorers plotted equal ``rumi.read`` of the pixel.

    One file's series (the bands its explorer shows last) and the catalog's NIR series,
    read from each date's own file.
    """
    record = json.loads((run.workdir / "explore_series.json").read_text())
    row, col = record["pixel"]
    header = rumi.info(source=record["series"]).header
    stored = rumi.read(record["series"], header, bands=record["bands"],
                       window=(row, col, 1, 1), pattern="t b y x")[:, :, 0, 0]
    scale = np.float32(1e-4)  # the sidecar's scale: xarray decodes to float32
    values = np.asarray(record["values"], dtype=np.float32)
    assert values.shape == (12, 3)
    np.testing.assert_array_equal(values, stored.astype(np.float32) * scale)
    per_date = [rumi.read(path, rumi.info(source=path).header, bands=[3],
                          window=(row, col, 1, 1), pattern="t b y x")[0, 0, 0, 0]
                for path in record["dates"]]
    np.testing.assert_array_equal(np.asarray(record["catalog_values"], dtype=np.float32),
                                  np.asarray(per_date).astype(np.float32) * scale)


#: What each notebook computed, checked against ground truth after its run.
RESULT_CHECKS: dict[str, Callable[[Run], None]] = {
    "time_series_exploration": check_pixel_series,
    "ml_chips": check_chip_model,
    "explore": check_explorer_series,
}


@pytest.mark.parametrize("name", BY_NOTEBOOK)
def test_notebook_runs_shows_its_figures_and_computes_the_truth(name, tmp_path):
    # One test per notebook, so each runs once: budget, files, figures and results are
    # checked on that one run (pytest-xdist gives each notebook a worker of its own).
    run = Run(NOTEBOOK_DIR / f"{name}.ipynb", tmp_path)
    assert run.seconds < NOTEBOOK_BUDGET, f"{name} took {run.seconds:.0f} s"
    # Notebooks that made their own folder remove it; ours was given, so their files stay.
    assert any(run.workdir.iterdir()), f"{name} wrote nothing to RUMI_NOTEBOOK_DIR"
    assert set(run.figures) >= EXPECTED_FIGURES.get(name, set()), sorted(run.figures)
    for figure, png in run.figures.items():
        assert (run.figure_dir / f"{figure}.png").read_bytes() == png
        image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        height, width, _ = image.shape
        assert width >= 300 and height >= 200, (figure, image.shape)
        packed = image.astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)
        colours = len(np.unique(packed))
        inked = np.any(image < 200, axis=-1).mean()  # share of pixels that are not near-white
        assert colours > 64 and inked > 0.02, (figure, colours, inked)
    RESULT_CHECKS.get(name, lambda run: None)(run)


def test_a_broken_cell_fails_the_run(tmp_path):
    nb = nbformat.read(NOTEBOOK_DIR / "quickstart.ipynb", as_version=4)  # in memory only
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first_code + 1, nbformat.v4.new_code_cell('raise RuntimeError("broken")'))
    with pytest.raises(CellExecutionError, match="broken"):
        _execute(nb, tmp_path)
    later = [c for c in nb.cells[first_code + 2:] if c.cell_type == "code"]
    assert later and all(c.execution_count is None for c in later)
