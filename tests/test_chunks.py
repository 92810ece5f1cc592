"""Dask chunks on the path xarray users type: whole frames, read groups, one native call each."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from tests.truth import read


def frame_shape(path, dims):
    meta = rumi.info(source=str(path))
    frame = {"time": 1 if "t" in meta.index_order else meta.time_count,
             "band": 1 if "b" in meta.index_order else meta.shape[-3],
             "y": meta.tile[0], "x": meta.tile[1]}
    return tuple(frame[d] for d in dims)


def assert_whole_frames(chunks, frame):
    for blocks, size in zip(chunks, frame, strict=True):
        assert all(b % size == 0 for b in blocks[:-1]), (blocks, size)


OPENERS = {
    "xarray": lambda p, c: xr.open_dataset(p, engine="rumi", chunks=c),
    "rx": lambda p, c: rx.open_dataset(p, chunks=c),
}


@pytest.mark.parametrize("opener", OPENERS)
def test_empty_chunks_are_read_groups_of_whole_frames(case, opener):
    path, header, data, c = case
    ds = OPENERS[opener](path, {})
    var = ds.band_data
    # corpus files are far smaller than one default read group: one chunk
    assert var.data.chunks == tuple((n,) for n in var.shape)
    expected = read(path, header)
    np.testing.assert_array_equal(var.values, expected)


@pytest.mark.parametrize("name", ["plane_tb_u16", "plane_bt_i16", "cell_hwbt_u16",
                                  "tile512_edge", "cell_b1_i16"])
def test_small_read_groups_stay_whole_frames_and_read_once_per_chunk(corpus, name):
    path, header, data, c = corpus[name]
    frame = frame_shape(path, ("time", "band", "y", "x"))
    one_frame = math.prod(frame) * data.dtype.itemsize
    with rx.set_options(group_bytes=one_frame):
        var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    assert_whole_frames(var.data.chunks, frame)
    assert var.data.npartitions > 1
    rx.stats(reset=True)
    np.testing.assert_array_equal(var.values, data)
    s = rx.stats()
    assert s["calls"] == var.data.npartitions  # one native call per chunk, no more
    assert s["bytes"] == data.nbytes  # every sample decoded once


@pytest.mark.parametrize("opener", OPENERS)
def test_auto_chunks_are_frame_multiples(corpus, opener):
    path, _, data, _ = corpus["plane_tb_u16"]
    import dask

    with dask.config.set({"array.chunk-size": "200KiB"}):
        var = OPENERS[opener](path, "auto").band_data
    assert_whole_frames(var.data.chunks, frame_shape(path, var.dims))
    assert var.data.npartitions > 1
    np.testing.assert_array_equal(var.values, data)


def test_explicit_chunks_splitting_frames_warn_and_stay_correct(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    with pytest.warns(UserWarning, match="separate the stored chunks"):
        var = xr.open_dataset(path, engine="rumi", chunks={"y": 50, "x": 70}).band_data
    assert var.data.chunks[2][0] == 50
    np.testing.assert_array_equal(var.values, data)


def test_read_group_multiples_do_not_warn(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        var = xr.open_dataset(path, engine="rumi", chunks={"time": -1, "band": -1}).band_data
    np.testing.assert_array_equal(var.values, data)


@pytest.mark.parametrize("name", ["plane_tb_u16", "cell_hwbt_u16", "tile512_edge",
                                  "plane_bt_i16"])
def test_reductions_and_scattered_selections(corpus, name):
    path, _, data, c = corpus[name]
    with rx.set_options(group_bytes=64 * 64 * 2 * 4):
        var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    np.testing.assert_allclose(var.mean("time").values, data.mean(axis=0))
    np.testing.assert_array_equal(var.max(["y", "x"]).values, data.max(axis=(2, 3)))
    rows = [0, c.h - 1, c.h // 2]
    cols = [c.w - 1, 1]
    got = var.isel(time=[c.t - 1, 0], band=[c.b - 1], y=rows, x=cols).values
    np.testing.assert_array_equal(got, data[[c.t - 1, 0]][:, [c.b - 1]][:, :, rows][..., cols])
    label = var.band.values[0]
    sel = var.sel(band=label).isel(time=-1).values
    np.testing.assert_array_equal(sel, data[-1, 0])


def test_band_as_variable_chunks(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    with rx.set_options(group_bytes=64 * 64 * 2):
        ds = xr.open_dataset(path, engine="rumi", chunks={}, band_as_variable=True)
    for i, name in enumerate(ds.data_vars):
        assert ds[name].dims == ("time", "y", "x")
        assert ds[name].data.chunks[0] == (1, 1, 1)
        np.testing.assert_array_equal(ds[name].values, data[:, i])


def test_chunking_after_a_lazy_selection_reads_the_selection(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    ds = xr.open_dataset(path, engine="rumi").isel(x=slice(None, None, -1))  # same shape
    np.testing.assert_array_equal(ds.chunk({}).band_data.values, data[..., ::-1])


# ---------------------------------------------------------------------------
# The chunk policy itself (rumi_xarray.dask.chunks), on generated grids, frames and targets

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rumi_xarray.dask import chunks as policy  # noqa: E402
from rumi_xarray.model.grid import Grid  # noqa: E402


def blocks_of(size: int, group: int) -> tuple[int, ...]:
    """Split a dimension the way dask splits it for a chunk size (as ``chunks={}`` gives)."""
    full, rest = divmod(size, group)
    return (group,) * full + ((rest,) if rest else ())


@st.composite
def grids(draw):
    time_count = draw(st.sampled_from([1, 2, 3, 4, 6, 12]))
    return Grid(time_count=time_count, bands=draw(st.integers(1, 13)),
                height=draw(st.integers(1, 2000)), width=draw(st.integers(1, 2000)),
                tile_height=draw(st.sampled_from([16, 64, 100, 256, 512])),
                tile_width=draw(st.sampled_from([16, 64, 100, 256, 512])),
                frame_layout="h w",
                index_order=draw(st.sampled_from([("t", "b"), ("b",), ("t",), ()])),
                dtype=np.dtype(draw(st.sampled_from(["u1", "u2", "f4", "f8"])))), \
        time_count * draw(st.sampled_from([1, 2, 5, 1000]))


@settings(max_examples=400, deadline=None, database=None)
@given(grids(), st.integers(1, 2**31), st.booleans())
def test_read_groups_are_whole_frames_cover_the_cube_and_fit_the_target(grid_steps, target,
                                                                         one_band):
    grid, steps = grid_steps
    group = policy.read_group(grid, steps, target, one_band=one_band)
    bands = 1 if one_band else grid.bands
    shape = (steps, bands, grid.height, grid.width)
    frame = (grid.time_frame, 1 if one_band else grid.band_frame,
             grid.tile_height, grid.tile_width)
    one_frame = tuple(min(f, n) for f, n in zip(frame, shape, strict=True))
    for n, size, f in zip(group, shape, frame, strict=True):
        assert 1 <= n <= size
        blocks = blocks_of(size, n)
        assert sum(blocks) == size  # the chunks {} gives cover the dimension exactly
        # ... and every inner chunk boundary is a frame boundary.
        assert all(edge % f == 0 for edge in np.cumsum(blocks)[:-1]), (group, frame, shape)
    # A group's time steps never straddle two calls of one scene: a divisor of its
    # steps, or whole scenes.
    assert grid.time_count % group[0] == 0 or group[0] % grid.time_count == 0
    # Over the target only when it is a single frame (a group is never less).
    if math.prod(group) * grid.dtype.itemsize > target:
        assert group == one_frame, (group, one_frame)


@settings(max_examples=400, deadline=None, database=None)
@given(st.integers(1, 50), st.integers(1, 2000), st.data())
def test_auto_chunks_moved_to_frame_boundaries_cover_the_dimension(frame, size, data):
    cuts = sorted(data.draw(st.sets(st.integers(1, size - 1), max_size=12))) if size > 1 else []
    blocks = tuple(np.diff([0, *cuts, size]).tolist())
    aligned = policy.frame_aligned(blocks, frame, size)
    assert sum(aligned) == size and all(b > 0 for b in aligned)
    assert all(edge % frame == 0 for edge in np.cumsum(aligned)[:-1]), (blocks, aligned)
    assert len(aligned) <= len(blocks)


@settings(max_examples=400, deadline=None, database=None)
@given(st.tuples(st.integers(0, 40), st.integers(1, 12), st.integers(1, 5000),
                 st.integers(1, 5000)),
       st.sampled_from([1, 2, 4, 8]), st.integers(1, 2**30),
       st.sampled_from([None, "auto", {}, 300, {"band": 1}, {"time": -1, "x": 700}]))
def test_stac_output_chunks_cover_the_output_in_equal_blocks(shape, itemsize, target, chunks):
    got = policy.stac_output_chunks(chunks, shape, itemsize, target=target)
    for blocks, size in zip(got, shape, strict=True):
        assert sum(blocks) == size
        assert all(b > 0 for b in blocks) or blocks == (0,)
        assert len(set(blocks[:-1])) <= 1 and blocks[-1] <= blocks[0]
    if chunks in (None, "auto", {}):
        # A large extent is split into squares of whole 256-pixel steps.
        split = [blocks[0] for blocks in got[2:] if len(blocks) > 1]
        assert all(side % policy.SPATIAL_STEP == 0 for side in split), got
        assert len(set(split)) <= 1, got
