"""Progress bars: unit by unit when on, off in pipes and on in terminals, the CLI switch;
and explain() counting the native calls a read makes, in a pipe and in a terminal.

Each subprocess case runs a script whose stderr is a pipe or a pseudo-terminal, so
tqdm decides as it would for a user. With ``progress=True``, a large lazy window read
runs as slices that share no frame (``planning.split_call``), one native call each, so
the bar can move. Slicing follows the option only, never the terminal, so explain()
says the same count wherever it runs, and exactly the calls the read makes. Ground
truth is ``rx.stats()`` (what librumi was asked to run) and the array that was written.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.model import planning
from rumi_xarray.write.to_rumi import to_rumi
from tests.checks import run_with_stderr
from tests.scenes import convert

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")

PROGRESS_SCRIPT = r"""
import sys
import numpy as np, dask.array as da, xarray as xr
import rumi_xarray as rx
from rumi_xarray import progress
from rumi_xarray.backend.accessor import backend_arrays
from rumi_xarray.backend.execute import run_call
from rumi_xarray.model import planning
from rumi_xarray.model.planning import Call
from rumi_xarray.native import reads
from rumi_xarray.write.to_rumi import to_rumi

folder = sys.argv[1]
times = np.datetime64("2024-01-01", "ns") + np.arange(2) * np.timedelta64(1, "D")
data = np.random.default_rng(0).integers(0, 1000, (2, 3, 64, 48)).astype(np.uint16)
cube = xr.DataArray(data, dims=("time", "band", "y", "x"), coords={"time": times})
print("STEP numpy", file=sys.stderr, flush=True)
to_rumi(cube, f"{folder}/a.rumi", tile_size=16)            # 2 * 3 * 4 * 3 = 72 frames
print("STEP dask", file=sys.stderr, flush=True)
to_rumi(cube.chunk({"y": 32}), f"{folder}/b.rumi", tile_size=16)
print("STEP catalog", file=sys.stderr, flush=True)
for i in range(5):
    to_rumi(cube.isel(time=[i % 2]), f"{folder}/c{i}.rumi", tile_size=16,
            time=[f"2024-02-0{i + 1}"])
rx.catalog([f"{folder}/c{i}.rumi" for i in range(5)])
print("STEP read", file=sys.stderr, flush=True)
planning.READ_BAR_BYTES = 1000           # small enough to split this small read
planning.READ_STEP_BYTES = 1
array = backend_arrays(xr.open_dataset(f"{folder}/a.rumi", engine="rumi"))[0]
call = Call(scenes=(0,), rows=(0,), cols=(0,), times=(0, 1), bands=(0, 1, 2), height=64,
            width=48)
got = run_call(array.cube, call, progress=progress.enabled())
assert np.array_equal(got, reads.run(array.cube, call)), "sliced read differs"
assert np.array_equal(got[0], data)
print("DONE", len(planning.split_call(array.cube, call, progress=progress.enabled())),
      file=sys.stderr, flush=True)
"""


def run_script(tmp_path: Path, env: dict[str, str], *, terminal: bool = False
               ) -> tuple[int, str]:
    """Run PROGRESS_SCRIPT; stderr is a pipe, or a pseudo-terminal when ``terminal``."""
    import sys

    from tests.checks import run_with_stderr

    script = tmp_path / "progress_script.py"
    script.write_text(PROGRESS_SCRIPT)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TQDM_", "RUMI_XARRAY_"))}
    full.update(env)
    return run_with_stderr([sys.executable, os.fspath(script), os.fspath(tmp_path)], full,
                           terminal=terminal)


def counts(text: str, total: int) -> set[int]:
    """Return the positions ``n`` of every ``n/total`` a tqdm bar printed."""
    return {int(m) for m in re.findall(rf"\b(\d+)/{total}\b", text)}


def test_progress_bars_advance_unit_by_unit_when_on(tmp_path: Path) -> None:
    # Every update drawn (tqdm's own environment settings): what is drawn is what
    # rumi_xarray reported, so each frame/file/slice must show up.
    code, err = run_script(tmp_path, {"RUMI_XARRAY_PROGRESS": "1", "TQDM_MININTERVAL": "0",
                                      "TQDM_MINITERS": "1"})
    assert code == 0, err
    numpy, rest = err.split("STEP dask")
    dask_part, rest = rest.split("STEP catalog")
    catalog_part, read_part = rest.split("STEP read")
    assert "compressing" in numpy and counts(numpy, 72) == set(range(73))
    assert "compressing" in dask_part and counts(dask_part, 72) == set(range(73))
    assert "cataloguing" in catalog_part and counts(catalog_part, 5) == set(range(6))
    slices = int(read_part.split("DONE")[1].split()[0])
    assert slices == 2  # frames walk time: one slice per time step, no frame read twice
    drawn = re.findall(r"reading:\s+(\d+)%.*?([\d.]+k?)/36\.0k", read_part)
    assert [p for p, _ in drawn] == ["0", "50", "100"], read_part  # 36 KiB in 2 slices


def test_progress_default_off_in_pipes_and_on_in_terminals(tmp_path: Path) -> None:
    code, err = run_script(tmp_path, {})
    assert code == 0, err
    assert "compressing" not in err and "cataloguing" not in err and "it/s" not in err
    code, screen = run_script(tmp_path, {}, terminal=True)
    assert code == 0, screen
    assert "compressing" in screen and "cataloguing" in screen
    code, screen = run_script(tmp_path, {"RUMI_XARRAY_PROGRESS": "0"}, terminal=True)
    assert code == 0, screen
    assert "compressing" not in screen


def test_cli_progress_switch(tif: Path, tmp_path: Path) -> None:
    code, _, err = convert("convert", tif, tmp_path / "a.rumi", "--progress")
    assert code == 0 and "compressing" in err
    code, _, err = convert("convert", tif, tmp_path / "b.rumi", "--no-progress")
    assert code == 0 and "compressing" not in err


# --- explain() counts the calls a read makes, in a pipe and in a terminal ---------------


def _cube(path: Path) -> np.ndarray:
    times = np.datetime64("2024-01-01", "ns") + np.arange(2) * np.timedelta64(1, "D")
    data = np.random.default_rng(3).integers(0, 1000, (2, 3, 64, 48)).astype(np.uint16)
    to_rumi(xr.DataArray(data, dims=("time", "band", "y", "x"), coords={"time": times}),
            path, tile_size=16, progress=False)
    return data


@pytest.mark.parametrize("shown", [True, False])
def test_explain_counts_the_calls_the_read_makes(tmp_path: Path, shown: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.rumi"
    data = _cube(path)
    # Small enough that this 36 KiB read is "large": it splits while a bar is shown.
    monkeypatch.setattr(planning, "READ_BAR_BYTES", 1000)
    monkeypatch.setattr(planning, "READ_STEP_BYTES", 1)
    with rx.set_options(progress=shown, cache_bytes=0):
        var = xr.open_dataset(path, engine="rumi").band_data
        explained = var.rumi.explain()
        rx.stats(reset=True)
        values = var.values
        ran = rx.stats()
    np.testing.assert_array_equal(values, data)
    assert explained.calls == ran["calls"]
    assert explained.items == ran["items"]
    assert explained.decoded_bytes == ran["bytes"]
    assert explained.frames == ran["planned_frames"] == 2 * 3 * 4 * 3  # no frame twice
    # Frames hold one (time, band) plane each and walk time outermost: slices by time.
    assert ran["calls"] == (2 if shown else 1)


SCRIPT = r"""
import sys
import xarray as xr
import rumi_xarray as rx
from rumi_xarray.model import planning

planning.READ_BAR_BYTES, planning.READ_STEP_BYTES = 1000, 1
with rx.set_options(cache_bytes=0):
    var = xr.open_dataset(sys.argv[1], engine="rumi").band_data
    explained = var.rumi.explain().calls
    rx.stats(reset=True)
    var.values
    print("COUNTS", explained, rx.stats()["calls"], file=sys.stderr, flush=True)
"""


def _run(tmp_path: Path, path: Path, *, terminal: bool,
         env: dict[str, str] | None = None) -> tuple[int, int, bool]:
    """Run SCRIPT with stderr a pipe or a pseudo-terminal.

    Return the calls explained, the calls made, and whether a reading bar was drawn.
    """
    script = tmp_path / "explain_script.py"
    script.write_text(SCRIPT)
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("TQDM_", "RUMI_XARRAY_"))}, **(env or {})}
    code, text = run_with_stderr([sys.executable, os.fspath(script), os.fspath(path)], env,
                                 terminal=terminal)
    assert code == 0, text
    explained, ran = text.split("COUNTS")[1].split()[:2]
    return int(explained), int(ran), "reading:" in text


def test_explain_gives_the_same_count_in_a_pipe_and_in_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "a.rumi"
    _cube(path)
    # By default a terminal shows a bar and a pipe does not; neither slices the read.
    # (The terminal's bar moves in one step.)
    assert _run(tmp_path, path, terminal=False) == (1, 1, False)
    assert _run(tmp_path, path, terminal=True) == (1, 1, True)
    # progress=True slices it (one call per slice), in a pipe as in a terminal.
    on = {"RUMI_XARRAY_PROGRESS": "1"}
    assert _run(tmp_path, path, terminal=False, env=on) == (2, 2, True)
    assert _run(tmp_path, path, terminal=True, env=on) == (2, 2, True)
