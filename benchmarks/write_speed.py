"""``to_rumi`` over tile sizes: writing must be linear in the number of frames (issue 20).

Run: ``.venv/bin/python benchmarks/write_speed.py [--reps 3] [--tiles 64,32,16,8]``.

One 1 x 4 x 512 x 512 uint16 image (the first date of the demo series,
``rumi_xarray.demo.synthetic.scene_series``) is written with ``rx.to_rumi``
from numpy and from dask (chunks of 256²) at each tile size, runs interleaved
per repetition, after one warm-up round whose files are checked against the
array through ``rumi.read``. Medians are compared with the largest tile.

Bars of issue 20: tile 16 (16x the frames of tile 64) takes at most 16x the
time of tile 64; tile 8 (64x the frames) at most 64x, i.e. linear. Every
write logs its progress at INFO (``rumi_xarray`` logger); the number of
lines logged is printed, so a long write in a pipe shows it is moving.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
import rumi  # noqa: E402
import xarray as xr  # noqa: E402

import rumi_xarray as rx  # noqa: E402

HERE = Path(__file__).resolve().parent


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def image() -> xr.DataArray:
    """Return the 1 x 4 x 512² uint16 image written (numbers, not decoded reflectance)."""
    from rumi_xarray.demo.synthetic import scene_series

    series = scene_series(1, 512)
    return xr.DataArray(np.asarray(series.band_data.values), dims=series.band_data.dims,
                        coords={"time": series.time, "band": series.band})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tiles", default="64,32,16,8")
    parser.add_argument("--inputs", default="numpy,dask")
    parser.add_argument("--tag", default="write")
    args = parser.parse_args(argv)
    tiles = [int(t) for t in args.tiles.split(",")]
    inputs = args.inputs.split(",")
    base = image()
    raw = np.asarray(base.values)
    sources = {"numpy": base,
               "dask": base.copy(data=da.from_array(raw, chunks=(1, 1, 256, 256)))}
    handler = _Lines()
    logger = logging.getLogger("rumi_xarray")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    lines: dict[tuple[str, int], int] = {}
    times: dict[tuple[str, int], list[float]] = {(i, t): [] for i in inputs for t in tiles}
    with tempfile.TemporaryDirectory() as folder, dask.config.set(scheduler="threads",
                                                                  num_workers=2):
        for run in range(1 + args.reps):
            for source in inputs:
                for tile in tiles:
                    path = os.path.join(folder, f"{source}-{tile}.rumi")
                    handler.count = 0
                    start = time.perf_counter()
                    header = rx.to_rumi(sources[source], path, tile_size=tile, progress=False)
                    elapsed = time.perf_counter() - start
                    if run == 0:
                        got = rumi.read(path, header, pattern="t b y x")
                        if not np.array_equal(got, raw):
                            raise SystemExit(f"{source} tile {tile}: file differs from input")
                        lines[(source, tile)] = handler.count
                    else:
                        times[(source, tile)].append(elapsed)
                    print(f"  run {run} {source:5s} tile {tile:3d}: {elapsed:.3f} s",
                          file=sys.stderr, flush=True)
    out = ["image 1x4x512x512 uint16, 2 dask threads"]
    out.append(f"to_rumi, median of {args.reps} (s), frames, time per frame, "
               "INFO lines logged:")
    medians = {k: statistics.median(v) for k, v in times.items() if v}
    for source in inputs:
        for tile in tiles:
            frames = 4 * (-(-512 // tile)) ** 2
            m = medians[(source, tile)]
            out.append(f"  {source:5s} tile {tile:3d}: {m:7.3f} s  {frames:6d} frames  "
                       f"{1e6 * m / frames:7.1f} us/frame  {lines[(source, tile)]} log lines")
    verdicts = []
    ref = max(tiles)
    for source in inputs:
        for tile in tiles:
            if tile == ref:
                continue
            factor = (ref // tile) ** 2
            ratio = medians[(source, tile)] / medians[(source, ref)]
            verdict = "MET" if ratio <= factor else "MISS"
            verdicts.append(verdict)
            out.append(f"  [{verdict}] {source} tile {tile} / tile {ref} = {ratio:.2f} "
                       f"({factor}x the frames; bar <= {factor})")
    runpy.run_path(str(HERE / "outfile.py"))["save"](args.tag, out, argv)
    return 0 if all(v == "MET" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
