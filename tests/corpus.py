"""A generated corpus of Rumi files covering every layout the engine accepts.

Each case is written with ``writer.write_array`` from a known numpy array, so
tests compare against both that array and ``rumi.read`` of the file.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rumi_xarray.write.to_rumi import write_array


@dataclass(frozen=True)
class Case:
    name: str
    t: int
    b: int
    h: int
    w: int
    tile: int
    dtype: str
    frame: str
    time_kind: str = "instant"  # "instant", "datetime" or "interval"
    georef: str | None = "utm"  # "utm", "geographic", "rotated" or None
    pixel_is_point: bool = False
    seed: int = 0
    extra: dict = field(default_factory=dict, compare=False)

    def array(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        shape = (self.t, self.b, self.h, self.w)
        if self.dtype == "bool":
            return rng.random(shape) > 0.5
        dtype = np.dtype(self.dtype)
        if dtype.kind == "f":
            base = rng.normal(0, 1000, shape).astype(dtype)
            return base
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -30000), min(info.max, 30000)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)

    def time(self) -> list:
        start = dt.date(2024, 1, 1)
        if self.time_kind == "instant":
            return [start + dt.timedelta(days=16 * i) for i in range(self.t)]
        if self.time_kind == "datetime":
            return [dt.datetime(2024, 3, 1, 10, 30, 15) + dt.timedelta(hours=7 * i)
                    for i in range(self.t)]
        return [(start + dt.timedelta(days=30 * i), start + dt.timedelta(days=30 * i + 29))
                for i in range(self.t)]

    def bands(self) -> list[str]:
        return [f"B{i + 1:02d}, band {i}" for i in range(self.b)]

    def georeferencing(self) -> tuple[tuple[float, ...] | None, int | None]:
        if self.georef == "utm":
            return (10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0), 32633
        if self.georef == "geographic":
            return (0.001, 0.0, 12.5, 0.0, -0.001, 45.0), 4326
        if self.georef == "rotated":
            return (8.0, 3.0, 300000.0, 2.0, -9.0, 5000000.0), 32632
        return None, None

    def write(self, folder: Path) -> tuple[Path, bytes, np.ndarray]:
        path = folder / f"{self.name}.rumi"
        data = self.array()
        transform, crs = self.georeferencing()
        header = write_array(path, data, bands=self.bands(), time=self.time(),
                             transform=transform, crs=crs,
                             pixel_is_point=self.pixel_is_point, tile_size=self.tile,
                             frame=self.frame)
        return path, header, data


CASES = [
    # plane frames walking (t, b) and (b, t); T > 1 and T == 1
    Case("plane_tb_u16", 3, 4, 150, 200, 64, "uint16", "plane"),
    Case("plane_bt_i16", 3, 2, 130, 70, 64, "int16", "plane-bt", time_kind="interval"),
    Case("plane_t1_u8", 1, 3, 200, 300, 256, "uint8", "plane", time_kind="datetime"),
    Case("plane_b1_f32", 4, 1, 100, 90, 64, "float32", "plane", georef="geographic"),
    Case("single_plane", 1, 1, 64, 64, 64, "uint16", "plane"),
    # cell frames: every axis longer than 1 inside the frame
    Case("cell_tbhw_f64", 2, 3, 90, 100, 64, "float64", "cell"),
    Case("cell_hwbt_u16", 2, 3, 70, 130, 64, "uint16", "cell-hwb"),
    Case("cell_t1_bool", 1, 2, 100, 100, 64, "bool", "cell", georef=None),
    Case("cell_b1_i16", 3, 1, 65, 65, 64, "int16", "cell", time_kind="interval"),
    # tile 512 with edge tiles, PixelIsPoint, rotated, no georeferencing
    Case("tile512_edge", 2, 2, 600, 530, 512, "uint16", "plane", pixel_is_point=True),
    Case("rotated", 1, 2, 50, 60, 64, "float32", "plane", georef="rotated"),
    Case("no_georef", 2, 2, 80, 80, 64, "uint8", "plane", georef=None),
]
