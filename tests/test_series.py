"""Pixel series through catalogs, and catalogs of series files of unequal date counts.

Ground truth is librumi's own ``rumi.read`` of each pixel of each file, and
each file opened alone (``xr.open_dataset(..., engine="rumi")``); native call
counts come from ``rx.stats()``. No timings (``benchmarks/pixel_series.py``
measures them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.model import selection
from rumi_xarray.write.to_rumi import write_array

BANDS = ["B02", "B03", "B04"]
TRANSFORM = (10.0, 0.0, 600000.0, 0.0, -10.0, 5000000.0)
EPSG = 32633
TILE = 32


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], np.ndarray]:
    """Five scene files of one date each: 3 bands of 96 x 96 uint16 on 32-pixel tiles."""
    folder = tmp_path_factory.mktemp("scenes")
    data = np.random.default_rng(11).integers(1, 60000, (5, 3, 96, 96)).astype(np.uint16)
    paths = []
    for i in range(5):
        path = folder / f"scene_{i}.rumi"
        write_array(path, data[i:i + 1], bands=BANDS, time=[f"2024-0{i + 1}-15"],
                    transform=TRANSFORM, crs=EPSG, tile_size=TILE, progress=False)
        paths.append(path)
    return paths, data


def _pixels(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 96, n), rng.integers(0, 96, n)


@pytest.mark.parametrize("on_disk", [False, True], ids=["rows", "parquet"])
def test_pixel_series_through_a_catalog_is_one_call_per_window_size(
        scenes: tuple[list[Path], np.ndarray], tmp_path: Path, on_disk: bool) -> None:
    paths, _ = scenes
    table = rx.catalog(paths)
    if on_disk:
        table.to_parquet(tmp_path / "catalog.parquet")
    ys, xs = _pixels(40, seed=3)
    cube = rx.open_catalog(tmp_path / "catalog.parquet" if on_disk else table,
                           mask_and_scale=False)
    rx.clear_cache()
    rx.stats(reset=True)
    got = cube.band_data.isel(y=xr.DataArray(ys, dims="p"), x=xr.DataArray(xs, dims="p"))
    values = got.transpose("time", "band", "p").values
    s = rx.stats()
    # Ground truth: librumi's own read of each pixel of each file.
    for t, path in enumerate(paths):
        header = rumi.info(source=str(path)).header
        for k, (y, x) in enumerate(zip(ys.tolist(), xs.tolist(), strict=True)):
            one = rumi.read(str(path), header, window=(y, x, 1, 1), pattern="t b y x")
            np.testing.assert_array_equal(values[t, :, k], one[0, :, 0, 0])
    # Each touched (scene, tile cell) is one item and each of its frames is decoded
    # once; a 1 x 1 window for a cell's lone pixel, one common window for every other
    # cell: one native call per window size, across every scene.
    cells: dict[tuple[int, int], set[tuple[int, int]]] = {}
    for y, x in zip(ys.tolist(), xs.tolist(), strict=True):
        cells.setdefault((y // TILE, x // TILE), set()).add((y, x))
    sizes = {len(found) > 1 for found in cells.values()}
    assert s["items"] == len(paths) * len(cells)
    assert s["planned_frames"] == len(paths) * len(cells) * len(BANDS)
    assert s["calls"] == len(sizes) <= 2


def test_more_scenes_do_not_make_more_calls(scenes: tuple[list[Path], np.ndarray]) -> None:
    paths, data = scenes
    ys, xs = _pixels(25, seed=4)
    calls = []
    for n in (2, 5):
        cube = rx.open_catalog(rx.catalog(paths[:n]), mask_and_scale=False)
        rx.clear_cache()
        rx.stats(reset=True)
        got = cube.band_data.isel(y=xr.DataArray(ys, dims="p"), x=xr.DataArray(xs, dims="p"))
        np.testing.assert_array_equal(got.transpose("time", "band", "p").values,
                                      data[:n][:, :, ys, xs])
        calls.append(rx.stats()["calls"])
    assert calls[0] == calls[1]


def test_a_pixel_series_shares_its_dates_and_bands_across_points() -> None:
    # xarray hands .isel(y=DataArray, x=DataArray) to the backend with every key
    # broadcast to (time, band, points): the dates and bands still go with no point.
    t, b, p = np.meshgrid(np.arange(4), np.arange(3), np.arange(5), indexing="ij")
    ys, xs = np.array([1, 5, 9, 30, 2])[p], np.array([3, 3, 8, 40, 49])[p]
    pts, shape = selection.points((4, 3, 40, 50), (t, b, ys, xs))
    assert shape == (4, 3, 5) and pts is not None
    assert pts.point_times is None and pts.point_bands is None
    assert pts.times == (0, 1, 2, 3) and pts.bands == (0, 1, 2)
    np.testing.assert_array_equal(pts.ys, [1, 5, 9, 30, 2])


def _p(values: list[int], dim: str = "p") -> xr.DataArray:
    return xr.DataArray(np.asarray(values), dims=dim)


VECTORIZED = {
    "series": lambda: {"y": _p([5, 9, 95]), "x": _p([7, 60, 95])},
    "one pixel three times": lambda: {"y": _p([5, 5, 5]), "x": _p([7, 7, 7])},
    "one date for every point": lambda: {"time": _p([1, 1, 1]), "y": _p([5, 9, 30]),
                                         "x": _p([7, 8, 40])},
    "a date per point": lambda: {"time": _p([0, 4, 2]), "y": _p([5, 9, 30]),
                                 "x": _p([7, 8, 40])},
    "dates by another dimension": lambda: {
        "time": xr.DataArray([[0, 0, 0], [3, 3, 3]], dims=("a", "p")), "y": _p([5, 9, 30]),
        "x": _p([7, 8, 40])},
    "bands by another dimension": lambda: {"band": _p([2, 0], "q"), "y": _p([5, 9, 30]),
                                           "x": _p([7, 8, 40])},
}


@pytest.mark.parametrize("name", list(VECTORIZED))
def test_vectorized_selections_through_a_catalog_equal_numpy(
        scenes: tuple[list[Path], np.ndarray], name: str) -> None:
    paths, data = scenes
    key = VECTORIZED[name]()
    cube = rx.open_catalog(rx.catalog(paths), mask_and_scale=False).band_data
    rx.clear_cache()
    got = cube.isel(key)
    expected = xr.DataArray(data, dims=cube.dims).isel(key)
    assert got.dims == expected.dims
    np.testing.assert_array_equal(got.values, expected.values)


# --- catalogs of series files holding different numbers of dates -----------------------

COUNTS = (3, 5, 1)


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], np.ndarray, list]:
    """Series files of 3, 5 and 1 dates, each frame holding every date and band of its tile.

    As ``rx.ingest(..., layout="series")`` writes them (``frame="cell"``): the file of
    one date has another frame layout (``b h w``) than the others (``t b h w``).
    """
    folder = tmp_path_factory.mktemp("series")
    days = [f"2024-01-{d:02d}" for d in (5, 15, 25)] + [
        f"2024-02-{d:02d}" for d in (1, 5, 10, 15, 20)] + ["2024-03-04"]
    data = np.random.default_rng(12).integers(-3000, 3000, (9, 2, 40, 50)).astype(np.int16)
    paths, start = [], 0
    for month, n in zip((1, 2, 3), COUNTS, strict=True):
        path = folder / f"series_2024-0{month}.rumi"
        write_array(path, data[start:start + n], bands=["red", "nir"],
                    time=days[start:start + n], transform=TRANSFORM, crs=EPSG, tile_size=16,
                    frame="cell", progress=False)
        paths.append(path)
        start += n
    # Listed out of time order: the catalog orders rows by time.
    return [paths[1], paths[2], paths[0]], data, days


def _concat(paths: list[Path], **kwargs: object) -> xr.Dataset:
    """Each file opened alone, loaded and concatenated along time, in time order."""
    alone = [xr.open_dataset(p, engine="rumi", **kwargs).load() for p in sorted(paths)]
    return xr.concat(alone, dim="time")


@pytest.mark.parametrize("on_disk", [False, True], ids=["rows", "parquet"])
@pytest.mark.parametrize("mask_and_scale", [None, False])
def test_series_files_of_3_5_and_1_dates_are_one_cube(series, tmp_path: Path, on_disk: bool,
                                                      mask_and_scale: bool | None) -> None:
    paths, data, days = series
    assert sorted(rumi.info(source=str(p)).time_count for p in paths) == [1, 3, 5]
    table = rx.catalog(paths)
    if on_disk:
        table.to_parquet(tmp_path / "catalog.parquet")
    where = tmp_path / "catalog.parquet" if on_disk else table
    expected = _concat(paths, mask_and_scale=mask_and_scale)
    lazy = rx.open_catalog(where, mask_and_scale=mask_and_scale)
    xr.testing.assert_identical(lazy.band_data.load(), expected.band_data)
    np.testing.assert_array_equal(
        rx.open_catalog(where, mask_and_scale=False).band_data.values, data)
    # Dask: one chunk per file along time (its own frames), the same numbers.
    chunked = rx.open_catalog(where, mask_and_scale=mask_and_scale, chunks={})
    assert chunked.band_data.chunks[0] == COUNTS
    assert chunked.band_data.encoding["preferred_chunks"]["time"] == COUNTS
    xr.testing.assert_identical(chunked.band_data.compute(), expected.band_data)
    auto = rx.open_catalog(where, mask_and_scale=mask_and_scale, chunks="auto")
    np.testing.assert_array_equal(auto.band_data.values, expected.band_data.values)
    # A time selection keeps the rows holding a selected date, then the dates.
    feb = rx.open_catalog(where, mask_and_scale=False, time=slice("2024-02-01", "2024-02-28"))
    np.testing.assert_array_equal(feb.band_data.values, data[3:8])
    assert [str(t)[:10] for t in feb.time.values] == days[3:8]


def test_series_cube_reads_each_layout_in_its_own_calls(series) -> None:
    paths, data, _ = series
    cube = rx.open_catalog(rx.catalog(paths), mask_and_scale=False)
    ys, xs = np.array([3, 5, 30, 39]), np.array([2, 4, 49, 20])
    rx.clear_cache()
    rx.stats(reset=True)
    got = cube.band_data.isel(y=xr.DataArray(ys, dims="p"), x=xr.DataArray(xs, dims="p"))
    np.testing.assert_array_equal(got.transpose("time", "band", "p").values,
                                  data[:, :, ys, xs])
    s = rx.stats()
    # Four pixels in three tile cells ((0, 0) twice), every file: one frame per cell and
    # file (frames hold every date and band); read_many never mixes the files' layouts.
    assert s["items"] == 3 * 3 and s["planned_frames"] == 3 * 3
    assert 3 <= s["calls"] <= 6
    # One date of each file, and a window across all of them.
    np.testing.assert_array_equal(cube.band_data.isel(time=[0, 4, 8]).values, data[[0, 4, 8]])
    np.testing.assert_array_equal(
        cube.band_data.isel(time=slice(2, 9), y=slice(10, 30), x=slice(5, 45)).values,
        data[2:9, :, 10:30, 5:45])


def test_open_stac_stacks_series_items_of_unequal_dates(series) -> None:
    paths, data, _ = series
    items = rx.to_stac(paths)
    ds = rx.open_stac(items, band_as_variable=False, chunks={})
    np.testing.assert_array_equal(ds.band_data.values, data)
    # The catalog cube on the files' own grid (no reprojection): one chunk per file.
    assert ds.band_data.chunks[0] == COUNTS
