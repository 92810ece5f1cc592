"""rioxarray and odc-geo operations on Rumi data: clip, pad and reproject fill with nodata,
dropping ``spatial_ref``, and the documented 4-D limits of rioxarray with what works instead.

Ground truth: the same operation on ``rioxarray.open_rasterio`` of the source GeoTIFF.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.write.to_rumi import to_rumi
from tests.scenes import EPSG, X0, Y0
from tests.truth import sidecar

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")


def test_clip_pad_reproject_fill_with_nodata_like_rioxarray(tif: Path, converted: Path
                                                            ) -> None:
    from shapely.geometry import box

    ours = rx.open_dataset(converted, chunks={}).band_data.isel(time=0)
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True, chunks={"band": 1})
    geometry = [box(X0 + 100, Y0 - 300, X0 + 300, Y0 - 100)]
    clipped = ours.rio.clip(geometry, crs=f"EPSG:{EPSG}", drop=False)
    assert np.isnan(clipped.values).sum() > clipped.size // 2  # NaN, not 0 that looks like data
    np.testing.assert_array_equal(
        clipped.values, peer.rio.clip(geometry, crs=f"EPSG:{EPSG}", drop=False).values)
    # pad_box on dask data (the issue saw it raise).
    bounds = (X0 - 100, Y0 - 500, X0 + 600, Y0 + 100)
    padded = ours.rio.pad_box(*bounds)
    assert padded.chunks is not None and padded.shape == (3, 60, 70)
    np.testing.assert_array_equal(padded.values, peer.rio.pad_box(*bounds).values)
    assert np.isnan(padded.values[:, :10]).all()
    # rio.reproject works on one time step (see the 4-D note in the docs).
    warped = ours.rio.reproject("EPSG:4326")
    np.testing.assert_array_equal(warped.values, peer.rio.reproject("EPSG:4326").values)
    assert np.isnan(warped.rio.nodata) and not (warped.values == 65535).any()
    # odc-geo's reproject fills with NaN as well.
    import odc.geo.xr  # noqa: F401  (the .odc accessor)

    odc_warped = ours.odc.reproject("EPSG:4326")
    np.testing.assert_array_equal(odc_warped.values, peer.odc.reproject("EPSG:4326").values)
    assert np.isnan(odc_warped.values).any()
    # Raw samples (mask_and_scale=False) fill with the nodata value they declare.
    raw = rx.open_dataset(converted, mask_and_scale=False).band_data.isel(time=0)
    raw_warped = raw.rio.reproject("EPSG:4326")
    assert raw_warped.rio.nodata == 0 and not (raw_warped.values == 65535).any()
    raw_peer = rioxarray.open_rasterio(tif).rio.reproject("EPSG:4326")
    np.testing.assert_array_equal(raw_warped.values, raw_peer.values)


# --- dropping spatial_ref -------------------------------------------------------------


def test_drop_spatial_ref_leaves_no_dangling_grid_mapping(converted: Path,
                                                          tmp_path: Path) -> None:
    ds = xr.open_dataset(converted, engine="rumi", drop_variables="spatial_ref")
    assert "spatial_ref" not in ds.variables
    for var in ds.variables.values():
        assert "grid_mapping" not in var.attrs and "grid_mapping" not in var.encoding
    assert ds.rio.crs is None and ds.band_data.rio.crs is None
    nc = tmp_path / "no_crs.nc"
    ds.to_netcdf(nc)  # nothing refers to a missing variable
    assert "grid_mapping" not in xr.open_dataset(nc).band_data.attrs
    restored = ds.rio.write_crs(EPSG)
    assert restored.rio.crs.to_epsg() == EPSG
    assert restored.rio.transform() == xr.open_dataset(converted, engine="rumi").rio.transform()


# --- the documented 4-D limits of rioxarray and what works instead --------------------


def test_four_dimensional_limits_and_alternatives(two_dates, tmp_path: Path) -> None:
    import odc.geo.xr  # noqa: F401  (the .odc accessor)
    from rioxarray.exceptions import TooManyDimensions

    paths, _ = two_dates
    cube = rx.open_mfdataset(paths).compute()
    path = tmp_path / "cube.rumi"
    to_rumi(cube, path, tile_size=8)
    ds = xr.open_dataset(path, engine="rumi")
    with pytest.raises(TooManyDimensions):
        ds.band_data.rio.reproject("EPSG:4326")
    with pytest.raises(TooManyDimensions):
        ds.band_data.rio.to_raster(tmp_path / "x.tif")
    one = ds.band_data.isel(time=0).rio.reproject("EPSG:4326")
    assert one.dims == ("band", "y", "x") and np.isnan(one.rio.nodata)
    by_band = xr.open_dataset(path, engine="rumi", band_as_variable=True)
    warped = by_band.rio.reproject("EPSG:4326")
    assert warped["B04"].dims == ("time", "y", "x")
    np.testing.assert_array_equal(warped["B04"].isel(time=0).values, one.sel(band="B04").values)
    by_band["B04"].rio.to_raster(tmp_path / "B04.tif")
    assert rioxarray.open_rasterio(tmp_path / "B04.tif").sizes["band"] == 2  # time steps
    lazy = xr.open_dataset(path, engine="rumi", chunks={}).band_data.odc.reproject("EPSG:4326")
    assert lazy.chunks is not None and lazy.dims[:2] == ("time", "band")
    assert np.isnan(lazy.values).any()
    # Reprojected, decoded data pack back with the same nodata.
    to_rumi(one.expand_dims(time=ds.time.values[:1]), tmp_path / "warped.rumi")
    assert sidecar(tmp_path / "warped.rumi")["nodata"] == 0
    np.testing.assert_array_equal(rx.open_dataset(tmp_path / "warped.rumi").band_data.values[0],
                                  one.values)
