"""Frame-aligned dask chunks on every path, and correct values through them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx


def frame_shape(path, dims):
    meta = rumi.info(source=str(path))
    frame = {"time": 1 if "t" in meta.index_order else meta.time_count,
             "band": 1 if "b" in meta.index_order else meta.shape[-3],
             "y": meta.tile[0], "x": meta.tile[1]}
    return tuple(frame[d] for d in dims)


def assert_aligned(chunks, frame, exact):
    for blocks, size in zip(chunks, frame, strict=True):
        inner = blocks[:-1]
        if exact:
            assert all(b == size for b in inner), (blocks, size)
            assert 0 < blocks[-1] <= size
        else:
            assert all(b % size == 0 for b in inner), (blocks, size)


OPENERS = {
    "xarray": lambda p, c: xr.open_dataset(p, engine="rumi", chunks=c),
    "xarray-grouped": lambda p, c: xr.open_dataset(p, engine="rumi", chunks=c,
                                                   chunked_array_type="rumi"),
    "rx": lambda p, c: rx.open_dataset(p, chunks=c),
}


@pytest.mark.parametrize("opener", OPENERS)
def test_empty_chunks_are_one_frame(case, opener):
    path, header, data, c = case
    ds = OPENERS[opener](path, {})
    var = ds.band_data
    assert_aligned(var.data.chunks, frame_shape(path, var.dims), exact=True)
    expected = rumi.read(str(path), header, pattern="t b y x")
    got = var.values if c.t > 1 else var.values[np.newaxis]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("opener", OPENERS)
def test_auto_chunks_are_frame_multiples(corpus, opener):
    path, _, data, _ = corpus["plane_tb_u16"]
    import dask

    with dask.config.set({"array.chunk-size": "200KiB"}):
        var = OPENERS[opener](path, "auto").band_data
    assert_aligned(var.data.chunks, frame_shape(path, var.dims), exact=False)
    assert max(var.data.chunks[2]) > 64 or max(var.data.chunks[0]) > 1
    np.testing.assert_array_equal(var.values, data)


def test_explicit_chunks_splitting_frames_warn_and_stay_correct(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    with pytest.warns(UserWarning, match="split frames"):
        var = rx.open_dataset(path, chunks={"y": 50, "x": 70}).band_data
    assert var.data.chunks[2][0] == 50
    np.testing.assert_array_equal(var.values, data)


def test_frame_multiples_do_not_warn(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        var = rx.open_dataset(path, chunks={"y": 128, "x": 64, "time": 2}).band_data
    np.testing.assert_array_equal(var.values, data)


@pytest.mark.parametrize("name", ["plane_tb_u16", "cell_hwbt_u16", "tile512_edge",
                                  "plane_bt_i16"])
def test_reductions_and_scattered_chunks(corpus, name):
    path, _, data, c = corpus[name]
    var = rx.open_dataset(path, chunks={}).band_data
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
    ds = rx.open_dataset(path, chunks={}, band_as_variable=True)
    for i, name in enumerate(ds.data_vars):
        assert ds[name].data.chunks[0] == (1, 1, 1)
        np.testing.assert_array_equal(ds[name].values, data[:, i])


def test_chunking_after_a_lazy_selection_is_refused_not_wrong(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    ds = xr.open_dataset(path, engine="rumi").isel(x=slice(None, None, -1))  # same shape
    with pytest.raises(ValueError, match="indexed lazily"):
        rx.chunk(ds, {})
    via_xarray = ds.chunk({}, chunked_array_type="rumi")  # falls back to dask's from_array
    np.testing.assert_array_equal(via_xarray.band_data.values, data[..., ::-1])
