"""How long opening takes: a million-frame graph, and a 1,000-scene catalog.

Run: ``.venv/bin/python benchmarks/open_speed.py``. Prints seconds; nothing here
is asserted (the tests check structure, this measures time).
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rumi_xarray.array import RumiBackendArray
from rumi_xarray.cube import Cube
from rumi_xarray.engine import Scene
from rumi_xarray.graph import grouped_array
from rumi_xarray.grid import Grid
from rumi_xarray.writer import write_array

import rumi_xarray as rx


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def million_frames() -> float:
    grid = Grid(time_count=1000, bands=10, height=640, width=640, tile_height=64,
                tile_width=64, frame_layout="h w", index_order=("t", "b"),
                dtype=np.dtype("uint16"))
    array = RumiBackendArray(Cube.single(Scene("/never/read.rumi", b"-"), grid), has_time=True)
    return best_of(3, lambda: grouped_array(array, {}))


def thousand_scene_catalog(folder: Path) -> tuple[float, float]:
    data = np.random.default_rng(0).integers(0, 4000, (1, 4, 1024, 1024)).astype(np.uint16)
    path = folder / "scene.rumi"
    write_array(path, data, bands=["B02", "B03", "B04", "B08"], time=[dt.date(2024, 1, 1)],
                transform=(10, 0, 600000, 0, -10, 5000000), crs=32633, tile_size=256)
    row = rx.catalog([path]).iloc[0]
    table = pd.DataFrame([row] * 1000).reset_index(drop=True)
    table["time_seconds"] = [[int(row["time_seconds"][0]) + 86400 * i] for i in range(1000)]
    table["path"] = [f"s3://bucket/tile/scene_{i:04d}.rumi" for i in range(1000)]
    parquet = folder / "catalog.parquet"
    table.to_parquet(parquet)
    lazy = best_of(3, lambda: rx.open_catalog(parquet))
    chunked = best_of(3, lambda: rx.open_catalog(parquet, chunks={}))
    return lazy, chunked


def main() -> None:
    print(f"grouped dask array over 1,000,000 frames: {million_frames():.3f} s (no task built)")
    with tempfile.TemporaryDirectory() as tmp:
        lazy, chunked = thousand_scene_catalog(Path(tmp))
    print(f"open_catalog of 1,000 scenes from Parquet: {lazy:.3f} s lazy, "
          f"{chunked:.3f} s with chunks={{}} (zero requests to the files)")


if __name__ == "__main__":
    main()
