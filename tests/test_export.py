"""Export: to_netcdf, rio.to_raster, to_zarr, and round trips back to Rumi.

GeoTIFF -> Rumi -> xarray -> netCDF / Zarr / GeoTIFF -> Rumi gives the same file;
layout facts are encoding, not attributes. The CF compliance of netCDF exports is
checked by tests/test_netcdf_cf.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.write.to_rumi import to_rumi
from tests.scenes import EPSG, TEXTS, convert
from tests.truth import sidecar

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")


# --- to_netcdf works; layout facts are encoding, not attributes -----------------------


def test_to_netcdf_with_the_default_engine_and_back(converted: Path, tmp_path: Path) -> None:
    ds = rx.open_dataset(converted)
    var = ds.band_data
    for obj in (ds, *ds.variables.values()):
        assert not any(str(k).startswith("rumi_") for k in obj.attrs)
        assert not any(isinstance(v, tuple) for v in obj.attrs.values())
    assert var.encoding["rumi_tile_size"] == (16, 16) and ds.rumi.tile == (16, 16)
    assert var.encoding["rumi_frame_layout"] == "h w"
    nc = tmp_path / "scene.nc"
    ds.to_netcdf(nc)
    # CF keeps grid mappings out of "coordinates": xarray makes spatial_ref a
    # coordinate again with decode_coords="all", as for any CF netCDF.
    back = xr.open_dataset(nc, decode_coords="all")
    np.testing.assert_array_equal(back.band_data.values, var.values)
    assert back.band_data.encoding["_FillValue"] == 0
    assert back.band_data.encoding["scale_factor"] == pytest.approx(1e-4)
    assert list(back.band.values) == ["B04", "B08", "B11"]
    assert list(back.band_text.values) == TEXTS
    assert back.rio.crs.to_epsg() == EPSG and back.rio.transform() == ds.rio.transform()
    np.testing.assert_array_equal(back.time.values, ds.time.values)
    assert not any(str(k).startswith("rumi_") for k in back.band_data.attrs)
    # A selected band still plots with one label, not a list of all of them (CF wants a
    # long_name on every data variable: tests/test_netcdf_cf.py).
    assert ds.band_data.sel(band="B08").attrs["long_name"] == "band data"
    assert back.band_data.attrs["long_name"] == "band data"


def test_rio_to_raster_gets_no_rumi_tags(converted: Path, tmp_path: Path) -> None:
    da = rx.open_dataset(converted).band_data.isel(time=0)
    out = tmp_path / "out.tif"
    da.rio.to_raster(out)
    with rasterio.open(out) as f:
        tags = f.tags()
        assert not any(k.lower().startswith("rumi") for k in tags)
        assert f.nodata == 0 and f.dtypes[0] == "uint16"  # written packed again
        assert f.scales[0] == pytest.approx(1e-4) and f.offsets[0] == pytest.approx(-0.1)
    np.testing.assert_array_equal(rioxarray.open_rasterio(out, mask_and_scale=True).values,
                                  da.values)


# --- round trips: GeoTIFF -> Rumi -> xarray -> netCDF / Zarr / GeoTIFF -> Rumi --------


def assert_same_rumi(got: Path, expected: Path) -> None:
    """Values (decoded and raw), nodata, scaling, bands, time, CRS and transform agree."""
    a, b = rx.open_dataset(got), rx.open_dataset(expected)
    np.testing.assert_array_equal(a.band_data.values, b.band_data.values)
    assert a.band_data.dtype == b.band_data.dtype
    raw_a = rx.open_dataset(got, mask_and_scale=False).band_data
    raw_b = rx.open_dataset(expected, mask_and_scale=False).band_data
    np.testing.assert_array_equal(raw_a.values, raw_b.values)
    facts_a, facts_b = sidecar(got), sidecar(expected)
    assert facts_a["nodata"] == facts_b["nodata"] and facts_a["units"] == facts_b["units"]
    for key in ("scale_factor", "add_offset"):
        assert np.float32(facts_a[key]) == np.float32(facts_b[key])
    meta_a, meta_b = rumi.info(source=os.fspath(got)), rumi.info(source=os.fspath(expected))
    assert meta_a.bands == meta_b.bands
    assert meta_a.time == meta_b.time and meta_a.time_kind == meta_b.time_kind
    assert meta_a.crs == meta_b.crs == EPSG
    assert meta_a.transform == meta_b.transform
    assert meta_a.pixel_is_point == meta_b.pixel_is_point
    assert a.rio.crs == b.rio.crs and a.rio.transform() == b.rio.transform()


@pytest.fixture(params=["instants", "intervals"])
def original(request: pytest.FixtureRequest, tif: Path, tmp_path: Path) -> Path:
    """The GeoTIFF converted to Rumi: one instant, or three monthly intervals."""
    out = tmp_path / "original.rumi"
    if request.param == "instants":
        code, _, err = convert("convert", tif, out, "--tile-size", "16")
        assert code == 0, err
        return out
    peer = rioxarray.open_rasterio(tif)  # raw samples, CF attributes
    months = [(f"2024-0{m}-01", f"2024-0{m + 1}-01") for m in (1, 2, 3)]
    series = xr.concat([peer + i for i in range(3)], dim="time", combine_attrs="override")
    to_rumi(series.where(peer != 0, 0).astype(np.uint16).assign_attrs(peer.attrs), out,
            time=months, tile_size=16)
    assert rumi.info(source=os.fspath(out)).time_kind == "interval"
    return out


def test_round_trip_through_netcdf(original: Path, tmp_path: Path) -> None:
    nc = tmp_path / "scene.nc"
    rx.open_dataset(original).to_netcdf(nc)  # the default engine of this environment
    again = tmp_path / "again.rumi"
    to_rumi(xr.open_dataset(nc, decode_coords="all"), again, tile_size=16)
    assert_same_rumi(again, original)


def test_round_trip_through_zarr(original: Path, tmp_path: Path) -> None:
    pytest.importorskip("zarr")
    store = tmp_path / "scene.zarr"
    # Zarr 2: its fixed-length strings (the band labels) have a specification; Zarr 3's
    # do not yet, and zarr-python warns on every such array.
    rx.open_dataset(original, chunks={}).to_zarr(store, zarr_format=2)
    again = tmp_path / "again.rumi"
    code, _, err = convert("convert", store, again, "--tile-size", "16")
    assert code == 0, err
    assert_same_rumi(again, original)


def test_round_trip_through_geotiff(original: Path, tmp_path: Path) -> None:
    ds = rx.open_dataset(original)
    tif = tmp_path / "exported.tif"
    step = ds.band_data.isel(time=-1)
    # rioxarray writes band descriptions from a long_name tuple: give it the texts.
    step.assign_attrs(long_name=tuple(ds.band_text.values)).rio.to_raster(tif)
    when = str(ds.time.values[-1])[:19]
    if "time_bnds" in ds:
        when = "/".join(str(v)[:19] for v in ds.time_bnds.values[-1])
    again = tmp_path / "again.rumi"
    code, _, err = convert("convert", tif, again, "--time", when, "--tile-size", "16")
    assert code == 0, err
    last = tmp_path / "last.rumi"
    to_rumi(ds.isel(time=[-1]), last, tile_size=16)
    assert_same_rumi(again, last)
