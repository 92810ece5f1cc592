"""The NDVI demo: write a synthetic Sentinel-2-like series, analyse it with xarray + dask.

What ``make demo`` runs: the series is written as Rumi files, opened with
``xr.open_dataset(..., engine="rumi", chunks={})`` and analysed in one dask
pass (NDVI per month, per land cover and season with clouds masked, one
pixel's series), and every number is checked against the same computation in
numpy on one plain ``rumi.read`` of the file.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr
from pyproj import CRS

from rumi_xarray.backend import accessor  # noqa: F401  (registers the .rumi accessor)
from rumi_xarray.demo import synthetic
from rumi_xarray.formatting import human_size
from rumi_xarray.model.cube import Scene
from rumi_xarray.native.reads import reference_read
from rumi_xarray.native.stats import stats
from rumi_xarray.write.to_rumi import to_rumi

SEASONS = ("DJF", "MAM", "JJA", "SON")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: Blue reflectance above which a pixel is taken as cloud.
CLOUD_BLUE = 0.2


def demo(out: str, *, n_dates: int = 24, size: int = 512, tile_size: int = 256,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Write a synthetic series, analyse it lazily with dask and check the results.

    Writes ``scenes/S2_33UUP_<date>.rumi`` (one file per date), the
    multi-date ``S2_33UUP_<year>.rumi`` and ``land_cover_<year>.rumi`` (a
    one-band map whose time is the year as an interval) into ``out``. Then
    opens the multi-date file with ``rumi_xarray.open_dataset(...,
    chunks={})`` and computes, in one dask pass, NDVI means per month, mean
    NDVI per land cover and season (clouds masked) and one pixel's NDVI time
    series, and compares them with the same numbers computed in numpy from
    one plain ``rumi.read`` of the file.

    Parameters
    ----------
    out : str
        Output directory, created if needed.
    n_dates, size, tile_size : int
        Dates over one year, image size and tile size.
    echo : callable, default print
        Receives each line of the report.

    Returns
    -------
    dict
        What was found: ``series`` (path), ``shape``, ``crs``, ``seasonal``
        (class -> season -> mean NDVI), ``monthly`` (month -> mean NDVI),
        ``pixel`` (NDVI series), ``reads`` (``rumi_xarray.stats()`` of the
        analysis), ``cloudy`` (dates), ``seconds``.

    Raises
    ------
    RuntimeError
        When a dask result differs from librumi's plain read.
    """
    started = time.perf_counter()
    scene = synthetic.scene_series(n_dates, size)
    year = int(str(scene["time"].values[0])[:4])
    paths = _demo_write(scene, out, year, tile_size)
    written = time.perf_counter() - started
    files = [*paths["scenes"], paths["series"], paths["land_cover"]]
    echo(f"rumi-xarray demo: {n_dates} dates x {scene.sizes['band']} bands x {size} x {size} "
         f"uint16, tile {tile_size}")
    echo(f"  wrote {len(paths['scenes'])} single-date files to "
         f"{os.path.join(out, 'scenes')}, {os.path.basename(paths['series'])} and "
         f"{os.path.basename(paths['land_cover'])}: "
         f"{human_size(sum(os.path.getsize(f) for f in files))} in {written:.1f} s")
    found = _demo_analyse(paths["series"], scene, echo)
    found["seconds"] = time.perf_counter() - started
    echo(f"  done in {found['seconds']:.1f} s")
    return found


def _demo_write(scene: xr.Dataset, out: str, year: int, tile_size: int) -> dict[str, Any]:
    scenes_dir = os.path.join(out, "scenes")
    os.makedirs(scenes_dir, exist_ok=True)
    scene_paths = []
    for i in range(scene.sizes["time"]):
        # One time step keeps a scalar time coordinate: a single-date file.
        step = scene["band_data"].isel(time=i)
        day = str(np.datetime_as_string(step["time"].values, unit="D")).replace("-", "")
        path = os.path.join(scenes_dir, f"S2_33UUP_{day}.rumi")
        to_rumi(step, path, tile_size=tile_size)
        scene_paths.append(path)
    series = os.path.join(out, f"S2_33UUP_{year}.rumi")
    to_rumi(scene, series, tile_size=tile_size)
    land_cover = os.path.join(out, f"land_cover_{year}.rumi")
    classes = ", ".join(f"{k} {name}" for k, name in enumerate(synthetic.LAND_COVER))
    to_rumi(scene["land_cover"].expand_dims(band=[f"land cover ({classes})"]), land_cover,
            tile_size=tile_size,
            time=(np.datetime64(f"{year}-01-01"), np.datetime64(f"{year + 1}-01-01")))
    return {"scenes": scene_paths, "series": series, "land_cover": land_cover}


def _demo_analyse(series_path: str, scene: xr.Dataset, echo: Callable[[str], None]
                  ) -> dict[str, Any]:
    """Compute the demo's statistics with dask, and again in numpy from one plain read."""
    # The band coordinate holds short names ("B04"), the first field of the texts.
    bands = {key: text.split(",")[0] for key, text in synthetic.BANDS.items()}
    stats(reset=True)
    started = time.perf_counter()
    ds = xr.open_dataset(series_path, engine="rumi", chunks={})
    data = ds["band_data"]
    red = data.sel(band=bands["red"]).astype(np.float32)
    nir = data.sel(band=bands["nir"]).astype(np.float32)
    ndvi = (nir - red) / (nir + red)
    clear = ndvi.where(data.sel(band=bands["blue"]) < CLOUD_BLUE)
    classes = xr.DataArray(scene["land_cover"].values, dims=("y", "x"))
    row, col = _crop_pixel(scene["land_cover"].values)
    lazy = {
        "monthly": clear.groupby("time.month").mean(),
        "pixel": ndvi.isel(y=row, x=col),
        "cloudy": (data.sel(band=bands["blue"]) >= CLOUD_BLUE).mean(("y", "x")),
        **{f"class_{k}": clear.where(classes == k).groupby("time.season").mean(...)
           for k in range(len(synthetic.LAND_COVER))},
    }
    # One Dataset, one compute: dask reads each chunk once for every statistic.
    computed = xr.Dataset({name: v.reset_coords(drop=True) for name, v in lazy.items()}).compute()
    seconds = time.perf_counter() - started
    reads = stats()

    truth = _demo_truth(ds, series_path, (row, col))
    checks = _demo_check(computed, truth, scene)

    ref = ds["spatial_ref"].attrs
    crs = f"EPSG:{ref['epsg']} ({CRS.from_epsg(int(ref['epsg'])).name})"
    echo(f"  opened {os.path.basename(series_path)} with chunks={{}}: "
         f"{dict(data.sizes)}, {crs}, {abs(float(ds['x'][1] - ds['x'][0])):g} m pixels, "
         f"{data.data.npartitions} chunk(s), each a read group of whole frames "
         f"read by one native call")
    cloudy_dates = [np.datetime_as_string(t, unit="D")
                    for t, f in zip(ds["time"].values, computed["cloudy"].values, strict=True)
                    if f > 0.2]
    echo(f"  cloudy dates (blue reflectance > {CLOUD_BLUE:g} on > 20% of pixels): "
         f"{', '.join(cloudy_dates) or 'none'}")
    seasonal = _seasonal_table(computed, echo)
    monthly = {MONTHS[int(m) - 1]: float(v) for m, v in zip(
        computed["monthly"]["month"].values,
        computed["monthly"].mean(("y", "x")).values, strict=True)}
    echo("  mean NDVI per month: " + "  ".join(f"{m} {v:.2f}" for m, v in monthly.items()))
    pixel = [float(v) for v in computed["pixel"].values]
    echo(f"  NDVI time series of crop pixel (row {row}, col {col}): "
         + " ".join(f"{v:.2f}" for v in pixel))
    echo(f"  native reads: {reads['calls']} call(s) for {reads['items']} window(s), "
         f"{reads['planned_frames']} frame(s) planned, {human_size(reads['bytes'])} returned, "
         f"in {seconds:.1f} s")
    echo(f"  checked against one plain rumi.read: {checks}")
    return {"series": series_path, "shape": tuple(int(n) for n in data.shape), "crs": crs,
            "seasonal": seasonal, "monthly": monthly, "pixel": pixel, "reads": reads,
            "cloudy": cloudy_dates}


def _crop_pixel(classes: np.ndarray) -> tuple[int, int]:
    """Return a crop pixel near the image centre (the most seasonal NDVI)."""
    rows, cols = np.nonzero(classes == 2)
    if rows.size == 0:
        return classes.shape[0] // 2, classes.shape[1] // 2
    centre = np.array(classes.shape) / 2
    nearest = int(np.argmin((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2))
    return int(rows[nearest]), int(cols[nearest])


def _demo_truth(ds: xr.Dataset, path: str, pixel: tuple[int, int]) -> dict[str, Any]:
    """Return the file's samples through one plain ``rumi.read``."""
    whole = reference_read(Scene(os.path.abspath(path), ds.rumi.header))
    return {"data": whole, "pixel": pixel}


def _demo_check(computed: xr.Dataset, truth: dict[str, Any], scene: xr.Dataset) -> str:
    """Recompute the dask results in numpy from the plain read; raise on any mismatch."""
    data = truth["data"]
    if not np.array_equal(data, scene["band_data"].values):
        raise RuntimeError("demo check failed: the file does not hold the samples written")
    names = list(scene["band"].values)
    # The file's sidecar says scale_factor 1e-4: xarray decodes counts to float32
    # reflectance (count as float32 times the float32 scale), as GDAL does.
    reflectance = data.astype(np.float32) * np.float32(synthetic.SCALE_FACTOR)
    red = reflectance[:, names.index(synthetic.BANDS["red"])]
    nir = reflectance[:, names.index(synthetic.BANDS["nir"])]
    ndvi = (nir - red) / (nir + red)
    row, col = truth["pixel"]
    if not np.array_equal(ndvi[:, row, col], computed["pixel"].values):
        raise RuntimeError("demo check failed: the pixel time series differs from rumi.read")
    clear = np.where(reflectance[:, names.index(synthetic.BANDS["blue"])] < CLOUD_BLUE, ndvi,
                     np.nan)
    months = scene["time"].dt.month.values
    worst = 0.0
    for month, dask_map in zip(computed["monthly"]["month"].values,
                               computed["monthly"].values, strict=True):
        with warnings.catch_warnings():
            # Pixels cloudy on every date of a month have no mean (NaN), as in dask.
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanmean(clear[months == month], axis=0)
        if not np.array_equal(np.isnan(expected), np.isnan(dask_map)):
            raise RuntimeError(f"demo check failed: month {month} masks differ")
        diff = np.nanmax(np.abs(expected - dask_map)) if np.isfinite(expected).any() else 0.0
        worst = max(worst, float(diff))
    # Means are sums in a different order in dask and numpy: float32 rounding only.
    if worst > 1e-5:
        raise RuntimeError(f"demo check failed: monthly means differ by up to {worst:.2e}")
    return (f"samples and pixel series identical, monthly means within {worst:.1e} "
            f"(float32 summation order)")


def _seasonal_table(computed: xr.Dataset, echo: Callable[[str], None]
                    ) -> dict[str, dict[str, float]]:
    echo("  mean NDVI by land cover and season (clouds masked):")
    echo("    " + " " * 8 + "".join(f"{s:>8}" for s in SEASONS))
    table: dict[str, dict[str, float]] = {}
    for k, cover in enumerate(synthetic.LAND_COVER):
        result = computed[f"class_{k}"]
        values = dict(zip(result["season"].values.tolist(), result.values.tolist(),
                          strict=True))
        table[cover] = {s: float(values[s]) for s in SEASONS if s in values}
        echo(f"    {cover:<8}" + "".join(
            f"{table[cover][s]:>8.2f}" if s in table[cover] else f"{'-':>8}" for s in SEASONS))
    return table
