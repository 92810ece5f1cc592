"""The packed reflectance scene the CF, band, export, error and progress tests share.

A Sentinel-2-like uint16 scene on a UTM 33N grid (nodata 0, scale 1e-4, offset
-0.1, units and GDAL band texts), as a user's GeoTIFF (written by rasterio),
a packed netCDF (written by this environment's default netCDF engine), and the
command line run in-process. The fixtures built on them are in ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from tests.geotiffs import write_geotiff

EPSG = 32633
X0, Y0, RES = 500000.0, 6000000.0, 10.0
TEXTS = ["B04, Red, 665nm", "B08, NIR, 842nm", "B11, SWIR, 1610nm"]
TRANSFORM = (RES, 0.0, X0, 0.0, -RES, Y0)
#: The TIFFTAG_DATETIME the scene's GeoTIFFs carry unless told otherwise.
STAMP = "2024:05:01 10:20:30"


def scene_geotiff(path: Path, data: np.ndarray, *, nodata: float | None = 0, block: int = 16,
                  stamp: str | None = STAMP, **bands: Any) -> Path:
    """Write a tiled GeoTIFF on the scene's grid with rasterio, as a user's data would come.

    ``bands`` are :func:`tests.geotiffs.write_geotiff`'s per-band keywords (scales,
    offsets, units, descriptions).
    """
    from affine import Affine

    return write_geotiff(path, data, crs=f"EPSG:{EPSG}", nodata=nodata,
                         transform=Affine(RES, 0.0, X0, 0.0, -RES, Y0), tiled=True,
                         blockxsize=block, blockysize=block, stamp=stamp, **bands)


def reflectance(seed: int = 0, shape: tuple[int, ...] = (3, 40, 50)) -> np.ndarray:
    """Sentinel-2-like digital numbers with a nodata (0) corner."""
    data = np.random.default_rng(seed).integers(1, 10000, shape).astype(np.uint16)
    data[:, :6, :9] = 0
    return data


def convert(*argv: object) -> tuple[int, str, str]:
    """Run ``rumi-xarray ARGV`` in this process: exit code, stdout, stderr."""
    from rumi_xarray.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def packed_netcdf(path: Path) -> xr.Dataset:
    """An int16 netCDF variable packed with scale, offset and a fill value."""
    rng = np.random.default_rng(4)
    t2m = rng.normal(280, 8, (3, 12, 16))
    t2m[:, :2, :3] = np.nan
    times = np.datetime64("2024-01-01", "ns") + np.arange(3) * np.timedelta64(6, "h")
    ds = xr.Dataset({"t2m": (("time", "lat", "lon"), t2m, {"units": "K"})},
                    coords={"time": times, "lat": 60.0 - 0.25 * (np.arange(12) + 0.5),
                            "lon": 5.0 + 0.25 * (np.arange(16) + 0.5)})
    ds["t2m"].encoding = {"dtype": "int16", "scale_factor": 0.01, "add_offset": 280.0,
                          "_FillValue": -32767}
    ds.to_netcdf(path)  # this environment's default netCDF engine
    return xr.open_dataset(path)
