"""Async loads: ``await ... load_async()`` off the event loop, loads awaited together batched."""

from __future__ import annotations

import asyncio
import datetime as dt

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.errors import RumiError
from rumi_xarray.write.to_rumi import write_array
from tests.truth import read

N = 6


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """N single-date files (a catalog) and one file holding all N dates."""
    folder = tmp_path_factory.mktemp("async")
    data = np.random.default_rng(12).integers(0, 9000, (N, 2, 200, 180)).astype(np.uint16)
    dates = [dt.date(2024, 1, 1) + dt.timedelta(days=5 * i) for i in range(N)]
    paths = []
    for i in range(N):
        path = folder / f"scene_{i}.rumi"
        write_array(path, data[i:i + 1], bands=["B1", "B2"], time=[dates[i]], tile_size=64)
        paths.append(path)
    cube = folder / "cube.rumi"
    header = write_array(cube, data, bands=["B1", "B2"], time=dates, tile_size=64)
    return paths, cube, header, data


def test_load_async_equals_rumi_read(scenes):
    _, cube, header, _ = scenes
    var = xr.open_dataset(cube, engine="rumi").band_data
    part = var.isel(time=[1, 4], y=slice(10, 90), x=slice(20, 150))
    got = asyncio.run(part.load_async())
    truth = read(cube, header, time=[1, 4], window=(10, 20, 80, 130))
    np.testing.assert_array_equal(got.values, truth)
    # and the Dataset flavour
    ds = asyncio.run(xr.open_dataset(cube, engine="rumi").isel(x=slice(0, 5)).load_async())
    np.testing.assert_array_equal(ds.band_data.values,
                                  read(cube, header, window=(0, 0, 200, 5)))


def test_gathered_loads_equal_rumi_read(scenes):
    _, cube, header, data = scenes
    var = xr.open_dataset(cube, engine="rumi").band_data
    ys, xs = np.array([3, 150, 77]), np.array([170, 9, 64])
    parts = [var.isel(time=2, y=slice(0, 64), x=slice(64, 128)),
             var.isel(band=1, y=[5, 190, 7], x=slice(None, None, 9)),
             var.isel(y=xr.DataArray(ys, dims="p"), x=xr.DataArray(xs, dims="p")),
             var.isel(time=0, band=0, y=199, x=0)]

    async def main():
        return await asyncio.gather(*(p.load_async() for p in parts))

    got = asyncio.run(main())
    full = read(cube, header)
    np.testing.assert_array_equal(got[0].values, full[2, :, 0:64, 64:128])
    np.testing.assert_array_equal(got[1].values, full[:, 1][:, [5, 190, 7]][..., ::9])
    np.testing.assert_array_equal(got[2].transpose("time", "band", "p").values,
                                  full[:, :, ys, xs])
    assert int(got[3].values) == int(full[0, 0, 199, 0])


def test_gathered_windows_of_a_catalog_share_one_native_call(scenes):
    paths, _, _, data = scenes
    cube = rx.open_catalog(rx.catalog([str(p) for p in paths]))
    var = cube.band_data
    windows = [var.isel(time=i, y=slice(40, 104), x=slice(10, 74)) for i in range(N)]

    async def main():
        return await asyncio.gather(*(w.load_async() for w in windows))

    rx.stats(reset=True)
    got = asyncio.run(main())
    s = rx.stats()
    for i, g in enumerate(got):
        one = read(paths[i], window=(40, 10, 64, 64))
        np.testing.assert_array_equal(g.values, one[0])
    assert s["calls"] == 1 and s["items"] == N  # one read_many for N loads


def test_gathered_equal_windows_of_one_file_share_native_calls(scenes):
    _, cube, header, data = scenes
    corners = [(0, 0), (64, 0), (128, 64), (0, 128), (70, 70)]  # one tile cell each
    var = xr.open_dataset(cube, engine="rumi").band_data
    again = xr.open_dataset(cube, engine="rumi").band_data  # another open of the same file
    loads = [v.isel(time=1, y=slice(r, r + 40), x=slice(c, c + 50))
             for v, (r, c) in zip([var, again] * 3, corners, strict=False)]
    loads += [var.isel(time=t, y=slice(0, 40), x=slice(0, 50)) for t in (3, 5)]

    async def main():
        return await asyncio.gather(*(w.load_async() for w in loads))

    rx.stats(reset=True)
    got = asyncio.run(main())
    s = rx.stats()
    for (r, c), g in zip(corners, got, strict=False):
        np.testing.assert_array_equal(g.values, data[1, :, r:r + 40, c:c + 50])
    np.testing.assert_array_equal(got[-2].values, data[3, :, :40, :50])
    np.testing.assert_array_equal(got[-1].values, data[5, :, :40, :50])
    assert s["calls"] < len(loads)
    assert s["calls"] <= 2  # equal windows: one read_many; one window over 3 dates: one call


def test_load_async_runs_off_the_event_loop(scenes):
    _, cube, _, data = scenes
    var = xr.open_dataset(cube, engine="rumi").band_data
    ticks = 0

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    async def main():
        stop = asyncio.Event()
        task = asyncio.create_task(ticker(stop))
        await asyncio.sleep(0)
        before = ticks
        got = await var.load_async()
        during = ticks - before
        stop.set()
        await task
        return got, during

    got, during = asyncio.run(main())
    np.testing.assert_array_equal(got.values, data)
    assert during > 0  # the loop kept running while librumi read


def test_failing_async_load_raises_naming_the_file(scenes, tmp_path):
    _, cube, _, _ = scenes
    broken = tmp_path / "broken.rumi"
    broken.write_bytes(cube.read_bytes())
    var = xr.open_dataset(broken, engine="rumi").band_data
    good = xr.open_dataset(cube, engine="rumi").band_data
    broken.unlink()

    async def main():
        return await asyncio.gather(var.isel(time=0).load_async(),
                                    good.isel(time=0).load_async(), return_exceptions=True)

    failed, fine = asyncio.run(main())
    assert isinstance(failed, RumiError) and "broken.rumi" in str(failed)
    assert isinstance(fine, xr.DataArray) and fine.shape == (2, 200, 180)
