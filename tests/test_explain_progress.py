"""explain() counts the native calls a read makes, with a progress bar shown or not.

With ``progress=True``, a large lazy window read runs as slices that share no
frame (``planning.split_call``), one native call each, so the bar can move.
Slicing follows the ``progress`` option only (``progress=True``), never the
terminal, so explain() says the same count wherever it runs, and exactly the
calls the read makes: with the option on or off, in a pipe and in a terminal.
Ground truth is ``rx.stats()`` (what librumi was asked to run) and the array
that was written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.model import planning
from rumi_xarray.write.to_rumi import to_rumi
from tests.checks import run_with_stderr


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
