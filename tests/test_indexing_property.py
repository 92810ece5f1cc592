"""Property: any OUTER selection of the lazy dataset equals numpy on the written array."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumi_xarray as rx

EXAMPLES = int(os.environ.get("RUMI_PROPERTY_EXAMPLES", "60"))
CASES = ["plane_tb_u16", "plane_bt_i16", "cell_hwbt_u16", "tile512_edge", "plane_t1_u8",
         "cell_b1_i16"]


def indexer(size: int) -> st.SearchStrategy:
    ints = st.integers(-size, size - 1)
    # Starts below -size with a negative step hit an xarray bug in lazy slice
    # composition (a numpy-backed LazilyIndexedArray gets it wrong too), so
    # bounds stay within [-size, size].
    bound = st.one_of(st.none(), st.integers(-size, size))
    steps = st.one_of(st.none(), st.integers(1, 7), st.integers(-7, -1))
    slices = st.builds(slice, bound, bound, steps)
    arrays = st.lists(ints, min_size=1, max_size=8).map(lambda v: np.array(v, dtype=np.int64))
    return st.one_of(ints, slices, arrays)


def numpy_outer(data: np.ndarray, keys: list) -> np.ndarray:
    """Orthogonal indexing, one axis at a time, as xarray defines it."""
    out = data
    axis = 0
    for key in keys:
        if isinstance(key, np.ndarray):
            out = np.take(out, key, axis=axis)
            axis += 1
        elif isinstance(key, slice):
            out = out[(slice(None),) * axis + (key,)]
            axis += 1
        else:
            out = np.take(out, key, axis=axis)
    return out


@st.composite
def selections(draw, shape):
    return [draw(indexer(n)) for n in shape]


def run_examples(strategy: st.SearchStrategy, examples: int, check: Callable[[Any], None]
                 ) -> None:
    """Run ``check`` on ``examples`` draws of ``strategy`` (no deadline, no saved examples)."""
    settings(max_examples=examples, deadline=None, database=None,
             suppress_health_check=[HealthCheck.function_scoped_fixture])(given(strategy)(check))()


def opened(corpus: dict, name: str, *, grouped: bool = False) -> tuple[xr.DataArray, np.ndarray]:
    """A corpus case's ``band_data`` and the array it was written from.

    Opened lazily, or with ``grouped`` in dask read groups small enough for several chunks.
    """
    path, _, data, _ = corpus[name]
    if not grouped:
        return xr.open_dataset(path, engine="rumi").band_data, data
    with rx.set_options(group_bytes=64 * 64 * data.itemsize * 2):  # several chunks
        var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    assert var.data.npartitions >= 4
    return var, data


def assert_outer_selections(var: xr.DataArray, full: np.ndarray, examples: int) -> None:
    """Check random OUTER selections of ``var`` against numpy on ``full``."""

    def check(keys):
        got = var.isel(dict(zip(var.dims, keys, strict=True))).values
        expected = numpy_outer(full, keys)
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)

    run_examples(selections(full.shape), examples, check)


@pytest.mark.parametrize("name", CASES)
def test_outer_selection_equals_numpy(corpus, name):
    var, data = opened(corpus, name)
    assert_outer_selections(var, data, EXAMPLES)


@pytest.mark.parametrize("name", ["plane_tb_u16", "cell_tbhw_f64"])
def test_outer_selection_on_read_group_chunks(corpus, name):
    var, data = opened(corpus, name, grouped=True)
    assert_outer_selections(var, data, max(10, EXAMPLES // 3))


# --- VECTORIZED (pointwise) keys ------------------------------------------------------

VECTOR_CASES = ["plane_tb_u16", "plane_bt_i16", "cell_hwbt_u16", "tile512_edge", "plane_t1_u8",
                "cell_b1_i16"]


@st.composite
def pointwise(draw, shape):
    """isel keys that xarray turns into a VECTORIZED key: y and x share a points dim.

    Time and band are left alone, integers, slices, arrays over their own dim,
    or arrays tied to the points (a time step per point); points may form a
    2-D grid of dims ("p", "q").
    """
    t, b, h, w = shape
    grid = draw(st.booleans())
    dims = ("p", "q") if grid else ("p",)
    n = (draw(st.integers(1, 4)), draw(st.integers(1, 3))) if grid else (draw(st.integers(1, 12)),)

    def positions(size):
        return np.array(draw(st.lists(st.integers(-size, size - 1), min_size=int(np.prod(n)),
                                      max_size=int(np.prod(n))))).reshape(n)

    keys = {"y": xr.DataArray(positions(h), dims=dims), "x": xr.DataArray(positions(w), dims=dims)}
    for name, size in (("time", t), ("band", b)):
        kind = draw(st.sampled_from(["all", "int", "slice", "own", "points"]))
        if kind == "int":
            keys[name] = draw(st.integers(-size, size - 1))
        elif kind == "slice":
            keys[name] = slice(draw(st.integers(0, size - 1)), None, draw(st.integers(1, 2)))
        elif kind == "own":
            keys[name] = xr.DataArray(np.array(draw(st.lists(st.integers(-size, size - 1),
                                                             min_size=1, max_size=4))),
                                      dims=f"{name}_k")
        elif kind == "points":
            keys[name] = xr.DataArray(positions(size), dims=dims)
    return keys


def assert_pointwise_selections(var: xr.DataArray, full: np.ndarray, examples: int) -> None:
    """Check random pointwise selections of ``var`` against numpy indexing of ``full``."""
    reference = xr.DataArray(full, dims=("time", "band", "y", "x"))

    def check(keys):
        got = var.isel(keys)
        expected = reference.isel(keys)  # xarray over numpy: numpy's own indexing
        assert got.dims == expected.dims
        np.testing.assert_array_equal(got.values, expected.values)

    run_examples(pointwise(full.shape), examples, check)


@pytest.mark.parametrize("name", VECTOR_CASES)
def test_pointwise_selection_equals_numpy(corpus, name):
    var, data = opened(corpus, name)
    assert_pointwise_selections(var, data, EXAMPLES)


def test_pointwise_selection_through_the_cache(corpus):
    # Second passes find reuse and read whole cells into the cache: still exact.
    var, data = opened(corpus, "plane_tb_u16")
    assert_pointwise_selections(var, data, EXAMPLES)
    assert_pointwise_selections(var, data, EXAMPLES // 2)
    assert rx.cache_info()["hits"] > 0


def test_pointwise_selection_on_read_group_chunks(corpus):
    # dask's vindex reads whole chunks through the backend: still exact.
    var, data = opened(corpus, "plane_tb_u16", grouped=True)
    assert_pointwise_selections(var, data, max(10, EXAMPLES // 3))
