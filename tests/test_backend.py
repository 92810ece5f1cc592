"""The rumi engine: values equal rumi.read, coordinates and attributes are right."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.backend.entrypoint import RumiBackendEntrypoint
from rumi_xarray.write.to_rumi import write_array
from tests.scenes import EPSG, TRANSFORM, reflectance
from tests.truth import read


def as_tbyx(ds: xr.Dataset) -> np.ndarray:
    return ds.band_data.values


def test_values_equal_rumi_read(case):
    path, header, data, _ = case
    ds = xr.open_dataset(path, engine="rumi")
    expected = read(path, header)
    got = as_tbyx(ds)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, data)


def test_time_is_always_a_dimension(case):
    path, _, data, c = case
    ds = xr.open_dataset(path, engine="rumi")
    assert ds.band_data.dims == ("time", "band", "y", "x")
    assert ds.time.dims == ("time",) and "time" in ds.indexes
    assert dict(ds.sizes) == {**{"time": c.t, "band": c.b, "y": c.h, "x": c.w},
                              **({"nv": 2} if c.time_kind == "interval" else {})}
    first = ds.time.values[0]
    np.testing.assert_array_equal(ds.band_data.sel(time=first).values, data[0])


def test_band_coordinate_holds_short_names_and_texts(case):
    path, _, data, c = case
    ds = xr.open_dataset(path, engine="rumi")
    # corpus texts are "B01, band 0": the short name is the first field
    assert list(ds.band.values) == [t.split(",")[0] for t in c.bands()]
    assert list(ds.band_text.values) == c.bands()
    name = c.bands()[-1].split(",")[0]
    np.testing.assert_array_equal(ds.band_data.sel(band=name).values, data[:, -1])


def test_time_coordinate(case):
    path, _, _, c = case
    ds = xr.open_dataset(path, engine="rumi")
    steps = c.time()
    if c.time_kind == "interval":
        starts = np.array([np.datetime64(a, "ns") for a, _ in steps])
        ends = np.array([np.datetime64(b, "ns") for _, b in steps])
        assert ds.time.attrs["bounds"] == "time_bnds"
        bnds = ds.time_bnds.values
        np.testing.assert_array_equal(bnds[:, 0], starts)
        np.testing.assert_array_equal(bnds[:, 1], ends)
    else:
        starts = np.array([np.datetime64(s, "ns") for s in steps])
        assert "time_bnds" not in ds.variables
    assert ds.time.dtype == np.dtype("datetime64[ns]")
    np.testing.assert_array_equal(ds.time.values, starts)


def test_decode_times_false_gives_cf_seconds(case):
    path, _, _, c = case
    ds = xr.open_dataset(path, engine="rumi", decode_times=False)
    assert ds.time.attrs["units"].startswith("seconds since 1970-01-01")
    decoded = xr.decode_cf(ds)
    np.testing.assert_array_equal(decoded.time.values,
                                  xr.open_dataset(path, engine="rumi").time.values)


def test_spatial_coordinates(case):
    path, _, _, c = case
    ds = xr.open_dataset(path, engine="rumi")
    transform, epsg = c.georeferencing()
    if transform is None:
        for name in ("x", "y", "xc", "yc", "spatial_ref"):
            assert name not in ds.variables
        assert "grid_mapping" not in ds.band_data.encoding
        return
    a, b, xoff, d, e, yoff = transform
    assert ds.spatial_ref.attrs["epsg"] == epsg
    assert f"{epsg}" in ds.spatial_ref.attrs["crs_wkt"] or "WGS 84" in ds.spatial_ref.attrs[
        "crs_wkt"]
    assert ds.band_data.encoding["grid_mapping"] == "spatial_ref"
    shift = 0.0 if c.pixel_is_point else 0.5
    if c.georef == "rotated":
        assert "x" not in ds.coords and "y" not in ds.coords
        row, col = 7, 11
        assert ds.xc.isel(y=row, x=col).item() == pytest.approx(
            a * (col + 0.5) + b * (row + 0.5) + xoff)
        assert ds.yc.isel(y=row, x=col).item() == pytest.approx(
            d * (col + 0.5) + e * (row + 0.5) + yoff)
        return
    np.testing.assert_allclose(ds.x.values, xoff + a * (np.arange(c.w) + shift))
    np.testing.assert_allclose(ds.y.values, yoff + e * (np.arange(c.h) + shift))
    assert ds.x.attrs["axis"] == "X" and ds.y.attrs["axis"] == "Y"
    assert ds.band_data.attrs["AREA_OR_POINT"] == ("Point" if c.pixel_is_point else "Area")


def test_rioxarray_reads_crs_and_transform(case):
    rioxarray = pytest.importorskip("rioxarray")
    assert rioxarray
    path, _, _, c = case
    transform, epsg = c.georeferencing()
    if transform is None or c.georef == "rotated":
        return
    ds = xr.open_dataset(path, engine="rumi")
    assert ds.rio.crs.to_epsg() == epsg
    a, b, xoff, d, e, yoff = transform
    if c.pixel_is_point:  # GDAL/rioxarray transforms are corner based
        xoff, yoff = xoff - a / 2, yoff - e / 2
    got = tuple(ds.rio.transform())[:6]
    assert got == pytest.approx((a, b, xoff, d, e, yoff))


def test_preferred_chunks_are_read_groups_of_whole_frames(case):
    path, _, _, c = case
    ds = xr.open_dataset(path, engine="rumi")
    meta = rumi.info(source=str(path))
    enc = ds.band_data.encoding
    walks = meta.index_order
    frame = {"time": 1 if "t" in walks else c.t, "band": 1 if "b" in walks else c.b,
             "y": meta.tile[0], "x": meta.tile[1]}
    assert enc["rumi_frame_shape"] == frame
    group = enc["preferred_chunks"]
    for dim, size in group.items():
        # whole frames (edge tiles end at the image edge)
        assert size % frame[dim] == 0 or size == ds.sizes[dim]
    # the whole corpus file is far below one default group: one chunk per dimension
    assert group == {"time": c.t, "band": c.b, "y": c.h, "x": c.w}
    assert enc["rumi_header"] == meta.header
    assert enc["rumi_frame_layout"] == meta.frame_layout
    assert enc["rumi_tile_size"] == tuple(meta.tile)
    # layout facts live in encoding and the accessor, never in attrs
    assert not [k for k in ds.band_data.attrs if k.startswith("rumi")]
    assert ds.rumi.frame_layout == meta.frame_layout and ds.rumi.tile == tuple(meta.tile)
    assert ds.rumi.frame_shape == frame


def test_band_as_variable(case):
    path, _, data, c = case
    ds = xr.open_dataset(path, engine="rumi", band_as_variable=True)
    assert list(ds.data_vars) == [t.split(",")[0] for t in c.bands()]
    for i, (name, text) in enumerate(zip(ds.data_vars, c.bands(), strict=True)):
        np.testing.assert_array_equal(ds[name].values, data[:, i])
        assert ds[name].attrs["long_name"] == text


def test_rx_open_dataset_matches_engine(case):
    path, _, _, _ = case
    a = xr.open_dataset(path, engine="rumi")
    b = rx.open_dataset(path, chunks={})
    xr.testing.assert_identical(a, b.compute())
    assert a.band_data.encoding.keys() == b.band_data.encoding.keys()


def test_bytes_source(corpus):
    path, header, data, _ = corpus["plane_tb_u16"]
    ds = xr.open_dataset(path.read_bytes(), engine="rumi")
    np.testing.assert_array_equal(ds.band_data.values, data)


def test_header_is_checked_against_source(corpus):
    path, header, data, _ = corpus["plane_tb_u16"]
    ds = xr.open_dataset(path, engine="rumi", header=header)
    np.testing.assert_array_equal(ds.band_data.values, data)
    other = corpus["cell_tbhw_f64"][1]
    with pytest.raises(ValueError, match=re.escape(path.name)):
        xr.open_dataset(path, engine="rumi", header=other)


def test_drop_variables(corpus):
    path = corpus["plane_bt_i16"][0]
    ds = xr.open_dataset(path, engine="rumi", drop_variables=["time_bnds"])
    assert "time_bnds" not in ds.variables


def test_guess_can_open(corpus, tmp_path):
    entry = RumiBackendEntrypoint()
    path = corpus["plane_tb_u16"][0]
    assert entry.guess_can_open(str(path))
    assert entry.guess_can_open(path)
    assert entry.guess_can_open("https://example.invalid/a/scene.RUMI?token=1")
    assert entry.guess_can_open("s3://bucket/scene.rumi")
    assert not entry.guess_can_open("scene.tif")
    assert not entry.guess_can_open("https://example.invalid/scene.tif")
    renamed = tmp_path / "no_extension"
    renamed.write_bytes(path.read_bytes())
    assert entry.guess_can_open(str(renamed))
    other = tmp_path / "other.bin"
    other.write_bytes(b"GIF89a....")
    assert not entry.guess_can_open(str(other))
    # xarray picks the engine by itself
    ds = xr.open_dataset(renamed)
    assert "band_data" in ds


def test_engine_is_registered():
    assert "rumi" in xr.backends.list_engines()


@pytest.mark.parametrize("allocator", ["numpy", "librumi"])
def test_both_result_allocations_give_rumi_read_values(corpus, monkeypatch, allocator):
    """Reads below LIBRUMI_ALLOCATES decode into a numpy buffer, larger ones into
    librumi's own allocation: both give rumi.read's values in an ordinary array."""
    from rumi_xarray.native import reads

    monkeypatch.setattr(reads, "LIBRUMI_ALLOCATES", 2**62 if allocator == "numpy" else 0)
    path, header, data, _ = corpus["plane_tb_u16"]
    truth = read(path, header)
    ds = xr.open_dataset(path, engine="rumi", cache=False)
    whole = ds.band_data.values
    np.testing.assert_array_equal(whole, truth)
    chip = ds.band_data.isel(time=[1, 0], band=slice(1, 3), y=slice(5, 40)).values
    np.testing.assert_array_equal(chip, truth[[1, 0], 1:3, 5:40])
    # an ordinary array: users modify loaded values in place
    assert whole.flags.writeable and whole.flags.c_contiguous
    whole[0, 0, 0, 0] = whole[0, 0, 0, 0] + 1
    grouped = xr.open_dataset(path, engine="rumi", chunks={}).band_data.compute()
    np.testing.assert_array_equal(grouped.values, truth)


# --- time is always a dimension: default open_mfdataset sorts single-date files -------


def test_default_open_mfdataset_sorts_shuffled_single_date_files(tmp_path: Path) -> None:
    data = reflectance(5, (6, 2, 12, 10))
    days = [dt.date(2024, 3, 1) + dt.timedelta(days=5 * i) for i in range(6)]
    paths = []
    for i in np.random.default_rng(7).permutation(6):
        path = tmp_path / f"scene_{i}.rumi"
        write_array(path, data[i:i + 1], bands=["B04", "B08"], time=[days[i]],
                    transform=TRANSFORM, crs=EPSG, tile_size=8)
        paths.append(path)
    ds = xr.open_mfdataset(paths, engine="rumi")  # default arguments
    np.testing.assert_array_equal(ds.time.values, np.array(days, dtype="datetime64[ns]"))
    np.testing.assert_array_equal(ds.band_data.values, data)
    single = xr.open_dataset(paths[0], engine="rumi")
    assert single.band_data.dims == ("time", "band", "y", "x") and single.sizes["time"] == 1
    when = single.time.values[0]
    np.testing.assert_array_equal(single.band_data.sel(time=when).values,
                                  data[int(paths[0].stem.split("_")[1])])
    np.testing.assert_array_equal(single.band_data.sel(time=str(when)[:10]).values,
                                  single.band_data.values[0])
    ours = rx.open_mfdataset(paths)
    assert ours.band_data.chunks is not None  # dask-backed by default, like xarray's
    np.testing.assert_array_equal(ours.band_data.values, data)
