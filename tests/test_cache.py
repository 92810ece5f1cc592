"""The decoded-tile cache: reuse for nearby lazy reads, never a wrong or stale tile."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.backend import cache
from rumi_xarray.conventions.sidecar import sidecar_path
from rumi_xarray.write.to_rumi import write_array
from tests.checks import assert_explain_matches_reads, run_threads


@pytest.fixture
def scene(tmp_path):
    data = np.random.default_rng(5).integers(0, 60000, (4, 3, 200, 260)).astype(np.uint16)
    path = tmp_path / "scene.rumi"
    write_array(path, data, bands=["a", "b", "c"],
                time=["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"], tile_size=64)
    return path, data


def test_nearby_pixels_are_cached_once_reuse_shows(scene):
    path, data = scene
    var = xr.open_dataset(path, engine="rumi").band_data
    rx.stats(reset=True)
    for y, x in [(3, 4), (10, 60), (63, 0), (5, 5)]:  # all inside tile (0, 0)
        np.testing.assert_array_equal(var.isel(y=y, x=x).values, data[:, :, y, x])
    s = rx.stats(reset=True)
    # the first pixel is read alone; the second shows reuse and caches the cell
    assert s["calls"] == 2 and s["planned_frames"] == 2 * 4 * 3
    assert cache.cache_info()["hits"] == 2 * 4 * 3
    np.testing.assert_array_equal(var.isel(y=slice(30, 100), x=slice(50, 70)).values,
                                  data[:, :, 30:100, 50:70])
    assert rx.stats()["calls"] == 1  # a first window elsewhere: one direct read


def test_rewritten_file_is_never_served_from_cache(scene):
    path, data = scene
    var = xr.open_dataset(path, engine="rumi").band_data
    np.testing.assert_array_equal(var.isel(y=1, x=1).values, data[:, :, 1, 1])
    # Same path, same size and header layout, new content: an in-place rewrite.
    replacement = (data[::-1] + 1).astype(np.uint16)
    # Written under the same name in a staging folder (write_array wants the .rumi suffix and
    # writes the file's sidecar beside it), then both moved over the old ones.
    staging = path.parent / "staging"
    staging.mkdir()
    write_array(staging / path.name, replacement, bands=["a", "b", "c"],
                time=["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"], tile_size=64)
    os.replace(sidecar_path(str(staging / path.name)), sidecar_path(str(path)))
    os.replace(staging / path.name, path)
    fresh = xr.open_dataset(path, engine="rumi").band_data
    np.testing.assert_array_equal(fresh.isel(y=1, x=1).values, replacement[:, :, 1, 1])


def test_copies_at_other_paths_do_not_alias(scene, tmp_path):
    path, data = scene
    other = tmp_path / "other.rumi"
    write_array(other, data + 7, bands=["a", "b", "c"],
                time=["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"], tile_size=64)
    a = xr.open_dataset(path, engine="rumi").band_data
    b = xr.open_dataset(other, engine="rumi").band_data
    np.testing.assert_array_equal(a.isel(y=9, x=9).values, data[:, :, 9, 9])
    np.testing.assert_array_equal(b.isel(y=9, x=9).values, data[:, :, 9, 9] + 7)
    mem = xr.open_dataset(other.read_bytes(), engine="rumi").band_data
    np.testing.assert_array_equal(mem.isel(y=9, x=9).values, data[:, :, 9, 9] + 7)


def test_capacity_is_bounded_and_zero_disables(scene):
    path, data = scene
    var = xr.open_dataset(path, engine="rumi").band_data
    plane = 64 * 64 * 2
    with rx.set_options(cache_bytes=40 * plane):
        for _ in range(2):  # the second pass shows reuse: planes get cached
            for y in range(0, 200, 50):
                for x in range(0, 260, 50):
                    np.testing.assert_array_equal(var.isel(y=y, x=x, time=0).values,
                                                  data[0, :, y, x])
                    assert cache.cache_info()["bytes"] <= 40 * plane
        assert cache.cache_info()["bytes"] > 0
    with rx.set_options(cache_bytes=0):
        assert cache.cache_info()["bytes"] == 0
        rx.stats(reset=True)
        var.isel(y=1, x=1).load()
        var.isel(y=1, x=1).load()
        assert rx.stats()["calls"] == 2 and cache.cache_info()["bytes"] == 0
    assert cache.cache_info()["max_bytes"] == cache.default_bytes()


def test_concurrent_readers_through_cache(scene):
    path, data = scene
    var = xr.open_dataset(path, engine="rumi").band_data
    errors = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(40):
            y, x = int(rng.integers(0, 200)), int(rng.integers(0, 260))
            got = var.isel(y=slice(y, y + 3), x=slice(x, x + 3)).values
            if not np.array_equal(got, data[:, :, y:y + 3, x:x + 3]):
                errors.append((y, x))

    run_threads(worker, 8)
    assert errors == []


def test_scattered_pixels_read_only_their_tiles(scene):
    path, data = scene
    var = xr.open_dataset(path, engine="rumi").band_data
    ys, xs = np.array([2, 190, 5]), np.array([250, 3])
    rx.stats(reset=True)
    np.testing.assert_array_equal(var.isel(y=ys, x=xs).values, data[:, :, ys][..., xs])
    s = rx.stats()
    # rows touch cells 0 and 2, columns cells 0 and 3: 4 cells x 4 times x 3 bands
    assert s["planned_frames"] == 4 * 4 * 3
    assert s["calls"] <= 2  # the bottom-right cell is an edge tile of another size


def test_explain_predicts_lazy_reads(scene):
    path, data = scene
    var = xr.open_dataset(path, engine="rumi").band_data
    for sel in ({"y": slice(10, 30), "x": slice(60, 70)},
                {"y": [1, 150], "x": [2, 255], "band": 1},
                {"y": slice(10, 30), "x": slice(60, 70)},  # now cached: nothing to read
                {"time": 0}):
        assert_explain_matches_reads(var.isel(sel), sel)


def test_blocks_are_cached_without_copies_and_evicted_whole():
    store = cache.TileCache(3 * 4096)
    blocks = [np.full((2, 32, 32), i, dtype=np.uint16) for i in range(3)]  # 4096 B each
    for i, block in enumerate(blocks):
        store.put_block(block, [((i, 0), block[0]), ((i, 1), block[1])])
    view = store.get((0, 1))
    assert view is not None and np.shares_memory(view, blocks[0])  # no copy
    assert not view.flags.writeable
    assert store.info()["bytes"] == 3 * 4096
    store.put_block(np.zeros((2, 32, 32), np.uint16), [(("new", 0), np.zeros((32, 32)))])
    # block 1 was least recently used (block 0 was read): it went, both its planes
    assert store.peek((1, 0)) is None and store.peek((1, 1)) is None
    assert store.peek((0, 0)) is not None and store.info()["bytes"] == 3 * 4096


def test_idle_scratch_counts_against_the_capacity():
    store = cache.TileCache(16 * 4096)
    a = store.take_scratch(4096)
    b = store.take_scratch(2 * 4096)
    assert a.nbytes >= 4096 and b.nbytes >= 2 * 4096 and not np.shares_memory(a, b)
    store.give_scratch(a)
    store.give_scratch(b)
    assert store.info()["bytes"] == a.nbytes + b.nbytes
    again = store.take_scratch(3000)  # the smallest idle buffer that fits is reused
    assert again is a and store.info()["bytes"] == b.nbytes
    store.give_scratch(again)
    store.give_scratch(store.take_scratch(4096 * 4))  # a third idle buffer drops the smallest
    assert store.info()["bytes"] <= 16 * 4096
    store.give_scratch(np.empty(8 * 4096, np.uint8))  # larger than a quarter: not kept
    assert store.info()["bytes"] <= 16 * 4096
    store.clear()
    assert store.info()["bytes"] == 0
