"""Sparse lazy reads at the engine limit: points, scattered selections, chips, whole loads.

Counts come from rx.stats() (what the native calls were asked to decode),
bytes from a real loopback HTTP server's request log, allocations from
tracemalloc (numpy reports its buffers to it). No timings.
"""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.backend import route
from rumi_xarray.write.to_rumi import write_array
from tests.checks import assert_explain_matches_reads

TIMES = ["2024-01-01", "2024-02-01"]


@pytest.fixture(scope="module")
def sparse_file(tmp_path_factory):
    """2 dates x 3 bands, 640 x 704 pixels on 64-pixel tiles: 10 x 11 cells, edge cells clipped."""
    data = np.random.default_rng(3).integers(0, 60000, (2, 3, 640, 700)).astype(np.uint16)
    path = tmp_path_factory.mktemp("sparse") / "sparse.rumi"
    write_array(path, data, bands=["a", "b", "c"], time=TIMES, tile_size=64)
    return path, data


def points_of(n: int, shape: tuple[int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, shape[0], n), rng.integers(0, shape[1], n)


def pointwise(var: xr.DataArray, ys: np.ndarray, xs: np.ndarray) -> xr.DataArray:
    return var.isel(y=xr.DataArray(ys, dims="p"), x=xr.DataArray(xs, dims="p"))


def test_fifty_points_decode_only_their_cells(sparse_file):
    path, data = sparse_file
    var = xr.open_dataset(path, engine="rumi").band_data
    ys, xs = points_of(50, data.shape[2:], seed=1)
    cells = {(int(y) // 64, int(x) // 64) for y, x in zip(ys, xs, strict=True)}
    rx.stats(reset=True)
    got = pointwise(var, ys, xs).transpose("time", "band", "p").values
    s = rx.stats()
    np.testing.assert_array_equal(got, data[:, :, ys, xs])
    # each touched cell once, every plane of it once; no bounding box, no rows x columns
    assert s["items"] == len(cells)
    assert s["planned_frames"] == len(cells) * 2 * 3
    # windows inside cells come in few sizes: few calls, not one per cell
    assert s["calls"] <= 6
    # the decoded bytes are the points' windows, not the cells' product
    assert s["bytes"] < len(cells) * 6 * 64 * 64 * 2 // 4


def test_points_with_their_own_time_step(sparse_file):
    path, data = sparse_file
    var = xr.open_dataset(path, engine="rumi").band_data
    ys, xs = points_of(30, data.shape[2:], seed=2)
    ts = np.random.default_rng(2).integers(0, 2, 30)
    cells = {(int(t), int(y) // 64, int(x) // 64) for t, y, x in zip(ts, ys, xs, strict=True)}
    rx.stats(reset=True)
    got = var.isel(time=xr.DataArray(ts, dims="p"), y=xr.DataArray(ys, dims="p"),
                   x=xr.DataArray(xs, dims="p")).transpose("band", "p").values
    np.testing.assert_array_equal(got, data[ts, :, ys, xs].T)
    # one time step per point: only that step's frames of each cell
    assert rx.stats()["planned_frames"] == len(cells) * 3


def test_scattered_outer_reads_only_cells_of_selected_pairs(sparse_file):
    path, data = sparse_file
    var = xr.open_dataset(path, engine="rumi").band_data
    rows, cols = np.array([630, 5, 7, 300]), np.array([699, 2])
    rx.stats(reset=True)
    np.testing.assert_array_equal(var.isel(y=rows, x=cols, time=1).values,
                                  data[1][:, rows][..., cols])
    s = rx.stats()
    # rows touch cells 0, 4, 9; columns 0 and 10: 6 cells, 3 bands
    assert s["items"] == 6 and s["planned_frames"] == 6 * 3


def test_cell_frames_decode_once_per_cell(tmp_path):
    # "cell" frames hold every date and band of a tile: one frame per touched cell
    data = np.random.default_rng(4).integers(0, 999, (2, 3, 256, 256)).astype(np.uint16)
    path = tmp_path / "cell.rumi"
    write_array(path, data, bands=["a", "b", "c"], time=TIMES, tile_size=64, frame="cell")
    var = xr.open_dataset(path, engine="rumi").band_data
    ys, xs = points_of(20, (256, 256), seed=5)
    cells = {(int(y) // 64, int(x) // 64) for y, x in zip(ys, xs, strict=True)}
    rx.stats(reset=True)
    got = pointwise(var, ys, xs).transpose("time", "band", "p").values
    np.testing.assert_array_equal(got, data[:, :, ys, xs])
    assert rx.stats()["planned_frames"] == len(cells)


def test_points_over_http_fetch_no_more_than_per_point_reads(http_server, remote_dir):
    data = np.random.default_rng(6).integers(0, 4000, (1, 2, 1024, 1024)).astype(np.uint16)
    header = write_array(remote_dir / "points.rumi", data, bands=["a", "b"], time=TIMES[:1],
                         tile_size=64)  # 256 cells, about 45 touched
    url = http_server.url("points.rumi")
    ys, xs = points_of(50, (1024, 1024), seed=7)
    http_server.reset()
    for y, x in zip(ys, xs, strict=True):
        one = rumi.read(url, header, window=(int(y), int(x), 1, 1), pattern="t b y x")
        np.testing.assert_array_equal(one[0, :, 0, 0], data[0, :, y, x])
    per_point = http_server.bytes_served
    var = xr.open_dataset(url, engine="rumi").band_data
    http_server.reset()
    got = pointwise(var, ys, xs).transpose("time", "band", "p").values
    lazy_bytes = http_server.bytes_served
    np.testing.assert_array_equal(got, data[:, :, ys, xs])
    assert 0 < lazy_bytes <= 1.5 * per_point
    # ... and far less than the file: only the touched cells' frames travel
    assert lazy_bytes < (remote_dir / "points.rumi").stat().st_size / 2
    # again twice: reuse shows (whole cells fill the cache), then all from the cache;
    # explain() predicts the calls made over HTTP (batched by file locality) each time
    for _ in range(2):
        part = pointwise(var, ys, xs)
        http_server.reset()
        plan, s = assert_explain_matches_reads(part, load=lambda p: np.testing.assert_array_equal(
            p.transpose("time", "band", "p").values, data[:, :, ys, xs]))
        assert http_server.bytes_served <= 1.25 * plan.compressed_bytes
    assert s["calls"] == 0 and http_server.bytes_served == 0


def test_explain_equals_stats_for_every_kind_of_read(sparse_file):
    path, data = sparse_file
    var = xr.open_dataset(path, engine="rumi").band_data
    ys, xs = points_of(40, data.shape[2:], seed=8)
    reads = [
        ("window", var.isel(y=slice(100, 150), x=slice(200, 260))),
        ("points", pointwise(var, ys, xs)),
        ("points again: reuse shows, cells fill the cache", pointwise(var, ys, xs)),
        ("points cached", pointwise(var, ys, xs)),
        ("window in cached cells", var.isel(y=slice(ys[0], ys[0] + 1), x=slice(xs[0], xs[0] + 1))),
        ("vectorized with own times", var.isel(time=xr.DataArray([1, 0], dims="p"),
                                               y=xr.DataArray([3, 600], dims="p"),
                                               x=xr.DataArray([3, 650], dims="p"))),
        ("scattered outer", var.isel(y=[1, 500, 90], x=[699, 3])),
        ("window again: reuse shows, cells fill", var.isel(y=slice(100, 150), x=slice(200, 260))),
        ("window cached", var.isel(y=slice(100, 150), x=slice(200, 260), band=[2, 0])),
        ("whole load", var),
        ("strided", var.isel(y=slice(None, None, 7), x=slice(None, None, -5))),
    ]
    kinds_seen = set()
    for label, part in reads:
        _, s = assert_explain_matches_reads(part, label)
        kinds_seen.add(s["calls"] > 0)
    assert kinds_seen == {True, False}  # some reads were served from the cache alone


def test_cache_stays_within_its_bound(sparse_file):
    path, data = sparse_file
    var = xr.open_dataset(path, engine="rumi").band_data
    plane = 64 * 64 * 2
    bound = route.CACHE_FRACTION * 12 * plane  # reads of up to 12 planes may be cached
    ys, xs = points_of(40, data.shape[2:], seed=11)  # 40 cells x 6 planes: > the bound
    with rx.set_options(cache_bytes=bound):
        for rep in range(3):
            for y, x in zip(ys.tolist(), xs.tolist(), strict=True):
                np.testing.assert_array_equal(var.isel(y=y, x=x).values, data[:, :, y, x])
                chip = var.isel(y=slice(y, y + 10), x=slice(x, x + 10), time=rep % 2).values
                np.testing.assert_array_equal(chip, data[rep % 2, :, y:y + 10, x:x + 10])
                assert rx.cache_info()["bytes"] <= bound, (rep, y, x)
        assert rx.cache_info()["hits"] > 0  # it was used
        assert rx.cache_info()["bytes"] > bound // 2  # and filled up to its bound
    # a read larger than the chosen fraction of the cache never goes through it
    rx.clear_cache()
    with rx.set_options(cache_bytes=8 * plane * route.CACHE_FRACTION - 1):
        for _ in range(3):
            var.isel(y=slice(0, 64), x=slice(0, 128)).load()  # 2 cells x 6 planes
        assert rx.cache_info()["entries"] == 0


def traced_peak(var: xr.DataArray) -> tuple[np.ndarray, int]:
    """Return ``var.values`` and the peak bytes traced while they were read."""
    tracemalloc.start()
    try:
        got = var.values
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return got, peak


def test_point_reads_allocate_no_bounding_block(tmp_path):
    # 2048 x 2048 on 64-pixel tiles: the points' bounding block would be ~8 MiB
    data = np.random.default_rng(9).integers(0, 999, (1, 1, 2048, 2048)).astype(np.uint16)
    path = tmp_path / "big.rumi"
    write_array(path, data, bands=["a"], time=TIMES[:1], tile_size=64)
    var = xr.open_dataset(path, engine="rumi").band_data
    ys, xs = points_of(50, (2048, 2048), seed=10)
    part = pointwise(var, ys, xs)
    got, peak = traced_peak(part)
    np.testing.assert_array_equal(got[0, 0], data[0, 0, ys, xs])
    assert peak < 256 * 2**10
    # a chip allocates its result, read in place: no second buffer
    chip = var.isel(y=slice(1000, 1256), x=slice(30, 286))
    rx.clear_cache()
    got, peak = traced_peak(chip)
    np.testing.assert_array_equal(got, data[:, :, 1000:1256, 30:286])
    assert peak < got.nbytes + 64 * 2**10


def test_whole_load_is_one_call_into_the_result(sparse_file):
    path, data = sparse_file
    for cache_bytes in (None, 2 * data.nbytes):  # default; too small for this load
        with rx.set_options(cache_bytes=cache_bytes):
            for _ in range(2):  # a second load is "seen": still direct when too large
                var = xr.open_dataset(path, engine="rumi").band_data
                rx.stats(reset=True)
                got, peak = traced_peak(var)
                np.testing.assert_array_equal(got, data)
                assert rx.stats()["calls"] == 1
                assert peak < data.nbytes + 2**20  # decoded in place: no second copy
                if cache_bytes is None:
                    break
            assert rx.cache_info()["entries"] == 0


def test_remote_call_threads_start_afresh_in_a_forked_child() -> None:
    # dask's processes scheduler forks workers after the parent read remotely: the
    # child inherits the pool object but none of its threads.
    from rumi_xarray.backend.execute import REMOTE

    parent = REMOTE.executor()
    assert parent.submit(int, "7").result(timeout=20) == 7
    pid = os.fork()
    if pid == 0:
        try:
            child = REMOTE.executor()
            ok = child is not parent and child.submit(int, "7").result(timeout=20) == 7
        except BaseException:
            ok = False
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert REMOTE.executor() is parent  # the parent keeps its own
