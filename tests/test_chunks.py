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
