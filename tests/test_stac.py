"""STAC in and out: to_stac, stac-geoparquet, open_stac against odc-stac, requests, errors.

The same scenes (two UTM zones, overlapping footprints, several dates, a
nodata corner) are written as Rumi files and as GeoTIFFs (one per band, as
STAC collections usually publish them) with hand-made STAC Items carrying
the projection, raster and eo extensions, as rio-stac writes them. The
GeoTIFF Items are loaded with ``odc.stac.load``, the peer, and the Rumi
Items with ``rx.open_stac`` onto the same grid.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pystac
import pytest
import rasterio
import rioxarray  # noqa: F401  (the .rio accessor)
import rumi
import xarray as xr
from affine import Affine
from odc.geo.geobox import GeoBox
from pyproj import Transformer
from pystac.extensions.eo import EOExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import RasterExtension
from shapely.geometry import Point, shape

import rumi_xarray as rx
from rumi_xarray.catalogs.table import COLUMNS
from rumi_xarray.cli.main import main
from rumi_xarray.conventions.facts import Facts
from rumi_xarray.conventions.sidecar import Sidecar, read_sidecar, write_sidecar
from rumi_xarray.dask.graphs import getter_calls
from rumi_xarray.stac import items as stac_items
from rumi_xarray.stac.geoparquet import read_geoparquet, to_table, write_geoparquet
from rumi_xarray.stac.parse import catalog_table, parse_items
from rumi_xarray.write.to_rumi import write_array
from tests.stac_items import geotiff_item

odc_stac = pytest.importorskip("odc.stac")

# odc-geo (used by odc-stac and by rx.open_stac) multiplies affines with `*` and calls
# shapely.ops.transform, both deprecated by their libraries: noise, not our warnings.
pytestmark = [pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning")]

BANDS = ["B02, Blue, 490nm", "B03, Green, 560nm", "B04, Red, 665nm"]
SHORT = ["B02", "B03", "B04"]
NODATA = 0
RES = 60.0
UTC = dt.UTC
#: Tile -> (EPSG, x origin, y origin): A in UTM 32N, B and C in 33N, near 12 E where
#: the zones meet; A overlaps B, B overlaps C.
TILES = {"A": (32632, 726000.0, 5004000.0), "B": (32633, 258000.0, 5006040.0),
         "C": (32633, 264000.0, 5001000.0)}
#: (tile, acquisition): A and B at the same instant on 1 May (one time step with
#: groupby="time"), 7 s apart on 11 May (two steps, one solar day).
SCENES = [("A", dt.datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
          ("B", dt.datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
          ("A", dt.datetime(2024, 5, 11, 10, 30, tzinfo=UTC)),
          ("B", dt.datetime(2024, 5, 11, 10, 30, 7, tzinfo=UTC)),
          ("B", dt.datetime(2024, 5, 21, 10, 30, tzinfo=UTC)),
          ("C", dt.datetime(2024, 5, 21, 10, 30, tzinfo=UTC)),
          ("C", dt.datetime(2024, 5, 31, 10, 30, tzinfo=UTC))]
#: An output grid over all tiles in UTM 33N at 50 m: every scene is resampled.
GEOBOX = GeoBox.from_bbox((252000, 4991000, 276000, 5007000), "EPSG:32633", resolution=50)


def scene_data(tile: str, k: int, height: int, width: int) -> np.ndarray:
    """Return ``(band, y, x)`` uint16 samples: a smooth field of lon/lat plus texture."""
    epsg, x0, y0 = TILES[tile]
    rows, cols = np.mgrid[0:height, 0:width]
    lon, lat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(
        x0 + (cols + 0.5) * RES, y0 - (rows + 0.5) * RES)
    out = np.empty((len(BANDS), height, width), dtype=np.uint16)
    for b in range(len(BANDS)):
        field = 3000 + 1500 * np.sin(lon * 60 + b) * np.cos(lat * 50 - k) + 200 * b + 37 * k
        texture = (rows * 7 + cols * 13 + b * 5 + k * 11) % 41
        out[b] = np.round(field + texture).astype(np.uint16)
    out[:, rows > cols * 0.8 + 60] = NODATA  # a no-data corner, as at a swath edge
    return out


def write_scenes(folder: Path, height: int = 150, width: int = 180, tile_size: int = 64,
                 scenes: list[tuple[str, dt.datetime]] | None = None) -> list[dict[str, Any]]:
    """Write every scene as one Rumi file (+ nodata sidecar) and one GeoTIFF per band."""
    out = []
    for k, (tile, when) in enumerate(scenes or SCENES):
        epsg, x0, y0 = TILES[tile]
        transform = (RES, 0.0, x0, 0.0, -RES, y0)
        data = scene_data(tile, k, height, width)
        name = f"{tile}_{when:%Y%m%dT%H%M%S}"
        rumi_path = folder / f"{name}.rumi"
        write_array(rumi_path, data[np.newaxis], bands=BANDS, time=[when.replace(tzinfo=None)],
                    transform=transform, crs=epsg, tile_size=tile_size, progress=False)
        write_sidecar(rumi_path, Sidecar(Facts(nodata=NODATA)))
        tifs = {}
        for b, short in enumerate(SHORT):
            tif = folder / f"{name}_{short}.tif"
            with rasterio.open(tif, "w", driver="GTiff", width=width, height=height, count=1,
                               dtype="uint16", crs=f"EPSG:{epsg}", transform=Affine(*transform),
                               nodata=NODATA, tiled=True, blockxsize=tile_size,
                               blockysize=tile_size, compress="deflate") as f:
                f.write(data[b], 1)
            tifs[short] = tif
        out.append({"name": name, "tile": tile, "when": when, "epsg": epsg,
                    "transform": transform, "data": data, "rumi": rumi_path, "tifs": tifs,
                    "shape": (height, width)})
    return out


def tif_item(scene: dict[str, Any], href: Any = str) -> pystac.Item:
    """Return a rio-stac-like Item of a scene's GeoTIFFs: one asset per band."""
    return geotiff_item(scene["name"], scene["when"], scene["epsg"], scene["transform"],
                        scene["shape"], {short: scene["tifs"][short] for short in SHORT},
                        BANDS, NODATA, href=href)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return write_scenes(tmp_path_factory.mktemp("stac"))


@pytest.fixture(scope="module")
def rumi_items(scenes: list[dict[str, Any]]) -> list[pystac.Item]:
    return rx.to_stac([s["rumi"] for s in scenes])


@pytest.fixture(scope="module")
def tif_items(scenes: list[dict[str, Any]]) -> list[pystac.Item]:
    return [tif_item(s) for s in scenes]


def computed(ds: xr.Dataset) -> xr.Dataset:
    """Return ``ds`` computed, without the CF copy of ``nodata`` that odc-stac lacks.

    rx.open_stac's raw variables carry ``_FillValue`` (so xr.decode_cf decodes them)
    beside odc-stac's ``nodata``: it must be that very value, and is dropped so the
    rest compares with odc-stac as identical.
    """
    out = ds.compute()
    for name in out.data_vars:
        attrs = out.variables[name].attrs
        if "_FillValue" in attrs:
            fill = attrs.pop("_FillValue")
            assert fill == attrs["nodata"] and type(fill) is type(attrs["nodata"]), name
    return out


# --- STAC out ------------------------------------------------------------------------


def test_to_stac_item_fields(scenes, rumi_items):
    scene, item = scenes[0], rumi_items[0]
    assert item.id == scene["name"] and item.datetime == scene["when"]
    assert "start_datetime" not in item.properties
    asset = item.assets[stac_items.ASSET_KEY]
    assert asset.media_type == "application/vnd.rumi" and asset.roles == ["data"]
    assert asset.href == str(scene["rumi"])
    fields = asset.extra_fields
    meta = rumi.info(source=str(scene["rumi"]))
    assert base64.b64decode(fields["rumi:header"]) == meta.header
    assert fields["rumi:frame_layout"] == meta.frame_layout
    assert fields["rumi:tile_size"] == [64, 64] and fields["rumi:time_count"] == 1
    assert fields["rumi:index_order"] == list(meta.index_order)
    assert fields["rumi:pixel_is_point"] is False
    assert fields["proj:code"] == "EPSG:32632"
    assert fields["proj:transform"] == list(scene["transform"])
    assert fields["proj:shape"] == [150, 180]
    assert [b["name"] for b in fields["eo:bands"]] == SHORT
    assert [b["common_name"] for b in fields["eo:bands"]] == ["blue", "green", "red"]
    assert [b["center_wavelength"] for b in fields["eo:bands"]] == pytest.approx(
        [0.49, 0.56, 0.665])
    assert [b["description"] for b in fields["eo:bands"]] == BANDS
    assert fields["raster:bands"] == [{"data_type": "uint16", "nodata": 0}] * 3
    # The WGS84 footprint holds the image's corners, projected with pyproj.
    to_lonlat = Transformer.from_crs(32632, 4326, always_xy=True)
    x0, y0 = scene["transform"][2], scene["transform"][5]
    footprint = shape(item.geometry).buffer(1e-9)
    for x, y in ((x0, y0), (x0 + 180 * RES, y0), (x0, y0 - 150 * RES),
                 (x0 + 180 * RES, y0 - 150 * RES)):
        lon, lat = to_lonlat.transform(x, y)
        assert footprint.contains(Point(lon, lat))
        assert item.bbox[0] <= lon <= item.bbox[2] and item.bbox[1] <= lat <= item.bbox[3]
    assert set(item.stac_extensions) >= {ProjectionExtension.get_schema_uri(),
                                         EOExtension.get_schema_uri(),
                                         RasterExtension.get_schema_uri()}
    # A valid GeoJSON Feature round trip through pystac.
    again = pystac.Item.from_dict(json.loads(json.dumps(item.to_dict())))
    assert again.assets["data"].extra_fields["rumi:header"] == fields["rumi:header"]


@pytest.mark.parametrize(("name", "left", "crosses"), [
    ("kamchatka", 600000.0, True),   # UTM 60N, 160 km wide at 60 N: over 180 E
    ("chukotka", 300000.0, False),   # the same zone, west of 180 E
])
def test_item_footprints_equal_odc_geos_and_split_at_the_antimeridian(tmp_path, name, left,
                                                                      crosses):
    path = tmp_path / f"{name}.rumi"
    write_array(path, np.ones((1, 1, 64, 64), dtype=np.uint8), bands=["a"],
                time=["2024-01-01"], transform=(2500.0, 0.0, left, 0.0, -2500.0, 6700000.0),
                crs=32660, tile_size=64, progress=False)
    item = rx.to_stac([path])[0]
    gbox = GeoBox((64, 64), Affine(2500.0, 0.0, left, 0.0, -2500.0, 6700000.0), "EPSG:32660")
    truth = gbox.footprint("epsg:4326", npoints=stac_items.FOOTPRINT_POINTS,
                           wrapdateline=True)
    assert item.geometry == truth.json
    assert item.bbox == pytest.approx(list(truth.boundingbox))
    assert item.geometry["type"] == ("MultiPolygon" if crosses else "Polygon")
    west, _, east, _ = item.bbox
    if crosses:  # the two parts reach the antimeridian from either side
        assert (west, east) == (pytest.approx(-180, abs=1e-3), pytest.approx(180, abs=1e-3))
    else:  # one part, west of it
        assert 170 < west < east < 180


def test_to_stac_time_series_and_intervals(tmp_path):
    data = np.arange(3 * 2 * 20 * 30, dtype=np.int16).reshape(3, 2, 20, 30)
    transform = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    series = tmp_path / "series.rumi"
    write_array(series, data, bands=["a", "b"], time=["2024-01-01", "2024-02-01T12:00:00",
                                                      "2024-03-01"],
                transform=transform, crs=32633, tile_size=16, progress=False)
    spans = tmp_path / "spans.rumi"
    write_array(spans, data[:2], bands=["a", "b"],
                time=[("2024-01-01", "2024-02-01"), ("2024-02-01", "2024-03-01")],
                transform=transform, crs=32633, tile_size=16, progress=False)
    write_sidecar(series, Sidecar(Facts(nodata=-1, scale=0.5, offset=10.0, units="K")))
    one = tmp_path / "one.rumi"
    write_array(one, data[:1], bands=["a", "b"], time=[("2024-01-01", "2024-01-08")],
                transform=transform, crs=32633, tile_size=16, progress=False)
    a, b, c = rx.to_stac([series, spans, one])
    assert a.datetime is None and a.properties["start_datetime"] == "2024-01-01T00:00:00Z"
    assert a.properties["end_datetime"] == "2024-03-01T00:00:00Z"
    assert a.properties["rumi:times"] == ["2024-01-01T00:00:00Z", "2024-02-01T12:00:00Z",
                                          "2024-03-01T00:00:00Z"]
    assert b.properties["rumi:times"] == [["2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"],
                                          ["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"]]
    assert (b.properties["start_datetime"], b.properties["end_datetime"]) == (
        "2024-01-01T00:00:00Z", "2024-03-01T00:00:00Z")
    assert a.assets["data"].extra_fields["raster:bands"] == [
        {"data_type": "int16", "nodata": -1, "scale": 0.5, "offset": 10.0, "unit": "K"}] * 2
    assert "rumi:times" not in c.properties and c.datetime is None
    assert c.properties["end_datetime"] == "2024-01-08T00:00:00Z"
    # Read back: every step, on the file's own grid (the catalog cube).
    ds = rx.open_stac([a], chunks={})
    np.testing.assert_array_equal(
        ds.time.values, np.array(["2024-01-01", "2024-02-01T12:00", "2024-03-01"],
                                 dtype="datetime64[ns]"))
    np.testing.assert_array_equal(ds.b.values, data[:, 1])  # raw samples, as odc-stac
    assert ds.b.attrs == {"nodata": -1, "_FillValue": -1, "units": "K", "scale_factor": 0.5,
                          "add_offset": 10.0}
    ds = rx.open_stac([b], band_as_variable=False)
    np.testing.assert_array_equal(ds.band_data.values, data[:2])
    np.testing.assert_array_equal(ds.time_bnds.values, np.array(
        [["2024-01-01", "2024-02-01"], ["2024-02-01", "2024-03-01"]], dtype="datetime64[ns]"))
    assert list(ds.band.values) == ["a", "b"]


def test_to_stac_ids(tmp_path, scenes):
    (tmp_path / "x").mkdir()
    twin = tmp_path / "x" / scenes[0]["rumi"].name
    shutil.copy(scenes[0]["rumi"], twin)
    with pytest.raises(rx.RumiCatalogError, match="would both be STAC item"):
        rx.to_stac([scenes[0]["rumi"], twin])
    named = rx.to_stac([scenes[0]["rumi"], twin], ids=lambda p: Path(p).parent.name)
    assert [i.id for i in named] == [scenes[0]["rumi"].parent.name, "x"]


def test_geoparquet_round_trip_equals_open_catalog(scenes, tmp_path):
    files = [s["rumi"] for s in scenes if s["tile"] == "B"]  # one shared grid
    table = rx.catalog(files)
    path = tmp_path / "items.parquet"
    write_geoparquet(rx.to_stac(files), path)
    back = read_geoparquet(path)
    assert [b["id"] for b in back] == [f.stem for f in files]
    # What the Items say is exactly what the files say: the same catalog table.
    again = catalog_table(parse_items(back))
    assert list(again.columns) == list(COLUMNS)
    for column in COLUMNS:
        for ours, theirs in zip(again[column], table[column], strict=True):
            if isinstance(theirs, (list, np.ndarray)):
                assert list(ours) == list(theirs), column
            else:
                assert ours == theirs or (pd.isna(ours) and pd.isna(theirs)), column
    cube = rx.open_catalog(table, chunks={}, mask_and_scale=False)
    stacked = rx.open_stac(path, chunks={}, band_as_variable=False)
    np.testing.assert_array_equal(stacked.band_data.values, cube.band_data.values)
    np.testing.assert_array_equal(stacked.time.values, cube.time.values)
    np.testing.assert_array_equal(stacked.x.values, cube.x.values)
    np.testing.assert_array_equal(stacked.y.values, cube.y.values)
    from_table = rx.open_stac(to_table(back), chunks={}, band_as_variable=False)
    xr.testing.assert_identical(computed(from_table), computed(stacked))
    per_band = rx.open_stac(path)  # lazily indexed, odc-stac's layout
    for i, name in enumerate(SHORT):
        np.testing.assert_array_equal(per_band[name].values, cube.band_data.values[:, i])
    assert per_band.odc.geobox == cube.odc.geobox


# --- STAC in, against odc-stac -------------------------------------------------------


# None is odc-stac's "id" (every Item its own step): odc-stac itself is the truth for it.
@pytest.mark.parametrize("groupby", ["time", "solar_day", "id", None])
@pytest.mark.parametrize("chunks", [{}, {"time": 1, "y": 128, "x": 100}])
def test_nearest_equals_odc_stac(rumi_items, tif_items, groupby, chunks):
    # GDAL's warper approximates the transform (to 1/8 pixel) over each output chunk, so
    # both libraries are given the same spatial chunks; time chunks do not matter.
    theirs = odc_stac.load(tif_items, bands=SHORT, geobox=GEOBOX, groupby=groupby,
                           chunks=chunks)
    ours = rx.open_stac(rumi_items, geobox=GEOBOX, groupby=groupby, chunks=chunks)
    assert ours.sizes["time"] == {"time": 5, "solar_day": 4, "id": 7, None: 7}[groupby]
    # Same variables, dtype, nodata attribute, time and spatial coordinates, values.
    xr.testing.assert_identical(computed(ours), computed(theirs))
    assert ours.odc.geobox == theirs.odc.geobox
    assert ours.rio.crs == theirs.rio.crs
    # Mosaics really fill one scene's no-data corner from another.
    first = ours.B04.isel(time=0).values
    assert (first != NODATA).sum() > (scene_valid(rumi_items[0]) * 0.5)


def scene_valid(item: pystac.Item) -> int:
    return int(np.prod(item.assets["data"].extra_fields["proj:shape"]))


#: The output grid of GEOBOX at coarser resolutions than the 60 m scenes: GDAL widens
#: its kernels by the shrink factor (2.5 and 3.5 here), and so must we.
COARSER = {res: GeoBox.from_bbox((252000, 4991000, 276000, 5007000), "EPSG:32633",
                                 resolution=res) for res in (150, 210)}
#: Every resampling GDAL's warper offers (gauss is for overviews only).
WARP_RESAMPLINGS = ["nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average",
                    "mode", "max", "min", "med", "q1", "q3", "sum", "rms"]
#: The grids of the resampling comparison: finer (50 m) and coarser than the sources.
GRIDS = {"finer-50m": GEOBOX, "coarser-150m": COARSER[150], "coarser-210m": COARSER[210]}
FAST_CASES = [("finer-50m", "bilinear"), ("finer-50m", "cubic"),
              ("coarser-150m", "bilinear"), ("coarser-150m", "cubic"),
              ("coarser-150m", "lanczos"), ("coarser-210m", "average")]
SLOW_CASES = [pytest.param(grid, method, marks=pytest.mark.slow)
              for grid in GRIDS for method in WARP_RESAMPLINGS
              if (grid, method) not in FAST_CASES]


@pytest.mark.parametrize(("grid", "resampling"), FAST_CASES + SLOW_CASES)
def test_resampling_within_one_count_of_odc_stac(rumi_items, tif_items, grid, resampling):
    chunks = {"time": 1, "y": 96, "x": 96}
    theirs = odc_stac.load(tif_items, bands=SHORT, geobox=GRIDS[grid], resampling=resampling,
                           chunks=chunks)
    ours = rx.open_stac(rumi_items, geobox=GRIDS[grid], resampling=resampling, chunks=chunks)
    for name in SHORT:
        a = ours[name].values.astype(np.int64)
        b = theirs[name].values.astype(np.int64)
        np.testing.assert_array_equal(a == NODATA, b == NODATA)
        # GDAL warps the same source pixels; only a few edge pixels round differently.
        assert np.abs(a - b).max() <= 1
        assert (a != b).mean() < 1e-3


@pytest.mark.parametrize("tile", ["A", "B"])
def test_sum_window_gives_gdal_the_pixels_of_the_whole_image(scenes, tile):
    """GDAL's sum over a chunk depends on the source pixels it is handed, not only on those
    under the chunk; odc.stac.load hands it the whole image. Given whole_image_window's
    window it must give, chunk by chunk, exactly what it gives with the whole image."""
    from odc.geo.overlap import compute_reproject_roi
    from odc.geo.roi import roi_is_empty
    from rasterio.warp import Resampling, reproject

    from rumi_xarray.stac.plan import whole_image_window

    scene = next(s for s in scenes if s["tile"] == tile)
    src = scene["data"][0]
    image = GeoBox(src.shape, Affine(*scene["transform"]), f"EPSG:{scene['epsg']}")

    def warp(pixels: np.ndarray, gbox: GeoBox, dst: GeoBox) -> np.ndarray:
        out = np.zeros(dst.shape.yx, dtype=pixels.dtype)
        reproject(np.ascontiguousarray(pixels), out, src_transform=gbox.transform,
                  src_crs=str(gbox.crs), src_nodata=NODATA, dst_transform=dst.transform,
                  dst_crs=str(dst.crs), dst_nodata=NODATA, resampling=Resampling.sum)
        return out

    warped = 0
    height, width = GEOBOX.shape.yx
    for y in range(0, height, 96):
        for x in range(0, width, 96):
            chunk = GEOBOX[y:min(y + 96, height), x:min(x + 96, width)]
            info = compute_reproject_roi(image, chunk)
            if roi_is_empty(info.roi_dst):
                continue
            window = whole_image_window(info.roi_src, src.shape)
            dst = chunk[info.roi_dst]
            np.testing.assert_array_equal(warp(src[window], image[window], dst),
                                          warp(src, image, dst))
            warped += 1
    assert warped >= 4


def test_bbox_and_crs_like_odc_stac(rumi_items, tif_items):
    bbox = (11.93, 45.07, 12.03, 45.14)
    theirs = odc_stac.load(tif_items, bands=["B04", "B02"], bbox=bbox, crs="EPSG:32633",
                           resolution=60, chunks={})
    ours = rx.open_stac(rumi_items, bands=["B04", "B02"], bbox=bbox, crs="EPSG:32633",
                        resolution=60, chunks={})
    xr.testing.assert_identical(computed(ours), computed(theirs))
    # Without a grid: the grid most items share (UTM 33N at 60 m), every footprint.
    theirs = odc_stac.load(tif_items, bands=SHORT, chunks={})
    ours = rx.open_stac(rumi_items, chunks={})
    xr.testing.assert_identical(computed(ours), computed(theirs))
    # like=: the grid of another load
    again = rx.open_stac(rumi_items, like=theirs, chunks={})
    xr.testing.assert_identical(computed(again), computed(
        odc_stac.load(tif_items, bands=SHORT, like=theirs, chunks={})))


def test_items_without_header_read_it_from_the_file(rumi_items, tif_items):
    """Items from another producer (no rumi:header, no eo:bands) cost a metadata read."""
    plain = [i.to_dict() for i in rumi_items]
    for d in plain:
        del d["assets"]["data"]["rumi:header"]
        del d["assets"]["data"]["eo:bands"]
    rx.stats(reset=True)
    ours = rx.open_stac(plain, geobox=GEOBOX, chunks={})
    assert rx.stats()["metadata"] == len(plain)
    xr.testing.assert_identical(computed(ours), computed(
        odc_stac.load(tif_items, bands=SHORT, geobox=GEOBOX, chunks={})))


def test_common_names_and_band_dimension(rumi_items, tif_items):
    ours = rx.open_stac(rumi_items, bands=["red", "blue"], geobox=GEOBOX, chunks={})
    assert list(ours.data_vars) == ["red", "blue"]
    theirs = odc_stac.load(tif_items, bands=["B04", "B02"], geobox=GEOBOX, chunks={})
    np.testing.assert_array_equal(ours.red.values, theirs.B04.values)
    stacked = rx.open_stac(rumi_items, bands=["B04", "B02"], geobox=GEOBOX, chunks={},
                           band_as_variable=False)
    assert stacked.band_data.dims == ("time", "band", "y", "x")
    assert list(stacked.band.values) == ["B04", "B02"]
    assert list(stacked.band_text.values) == [BANDS[2], BANDS[0]]
    assert list(stacked.common_name.values) == ["red", "blue"]
    shared = rx.open_stac([i for i in rumi_items if i.id.startswith("B_")],
                          bands=["B04", "B02"], band_as_variable=False)
    for name in ("band", "band_text", "common_name", "center_wavelength"):
        np.testing.assert_array_equal(shared[name].values, stacked[name].values)
    np.testing.assert_array_equal(stacked.band_data.sel(band="B02").values, theirs.B02.values)
    # chunks=None across grids loads at once, like odc.stac.load without chunks.
    eager = rx.open_stac(rumi_items, bands=["B04"], geobox=GEOBOX)
    assert isinstance(eager.B04.variable._data, np.ndarray)
    np.testing.assert_array_equal(eager.B04.values, theirs.B04.values)


def test_multi_step_rumi_files_equal_single_step_items(scenes, tif_items, tmp_path):
    """Tile A's two dates stored in ONE Rumi file load as the two GeoTIFF Items do."""
    a = [s for s in scenes if s["tile"] == "A"]
    both = tmp_path / "A_series.rumi"
    write_array(both, np.stack([s["data"] for s in a]), bands=BANDS,
                time=[s["when"].replace(tzinfo=None) for s in a], transform=a[0]["transform"],
                crs=a[0]["epsg"], tile_size=64, progress=False)
    write_sidecar(both, Sidecar(Facts(nodata=NODATA)))
    items = rx.to_stac([both, *[s["rumi"] for s in scenes if s["tile"] != "A"]])
    assert items[0].properties["rumi:times"] == [f"{s['when']:%Y-%m-%dT%H:%M:%SZ}" for s in a]
    ours = rx.open_stac(items, geobox=GEOBOX, chunks={"time": 3})
    theirs = odc_stac.load(tif_items, bands=SHORT, geobox=GEOBOX, chunks={})
    xr.testing.assert_identical(computed(ours), computed(theirs))


def test_shared_grid_opens_the_catalog_cube(scenes, tif_items):
    """Items on one grid, no reprojection: the catalog cube, grouped reads across scenes."""
    b_scenes = [s for s in scenes if s["tile"] == "B"]
    items = rx.to_stac([s["rumi"] for s in b_scenes])
    tifs = [t for t in tif_items if t.id.startswith("B_")]
    lazy = rx.open_stac(items)
    # lazily indexed Rumi variables, not a reprojecting graph
    assert lazy.B02.rumi.sources == [f"{s['rumi']} (catalog row {i})"
                                     for i, s in enumerate(b_scenes)]
    xr.testing.assert_identical(computed(lazy), computed(odc_stac.load(tifs, chunks={})))
    grouped = rx.open_stac(items, chunks={})
    rx.stats(reset=True)
    series = grouped.B03.isel(x=40, y=70).values
    assert rx.stats()["calls"] == 1 and rx.stats()["items"] == len(b_scenes)
    np.testing.assert_array_equal(series, [s["data"][1, 70, 40] for s in b_scenes])
    # a bbox inside the grid is a window of the cube, still no resampling
    bbox = (11.95, 45.12, 12.0, 45.15)
    window = rx.open_stac(items, bbox=bbox, chunks={})
    assert window.B02.rumi.sources == lazy.B02.rumi.sources
    xr.testing.assert_identical(computed(window),
                                computed(odc_stac.load(tifs, bbox=bbox, chunks={})))


def test_time_is_nanoseconds_on_every_path(scenes, rumi_items, tif_items):
    """time is datetime64[ns] on every path, as open_dataset and open_catalog give it.

    odc-stac builds its time from datetime objects, so its resolution is whatever
    this xarray infers for them (ns before xarray 2025.01, us since): its values are
    the reference, not its dtype.
    """
    b_items = [i for i in rumi_items if i.id.startswith("B_")]
    odc = odc_stac.load(tif_items, bands=SHORT, geobox=GEOBOX, chunks={})
    peers = {
        "open_dataset": xr.open_dataset(scenes[0]["rumi"], engine="rumi"),
        "open_catalog": rx.open_catalog(rx.catalog([s["rumi"] for s in scenes
                                                    if s["tile"] == "B"])),
    }
    ours = {
        "shared, lazy": rx.open_stac(b_items),
        "shared, dask": rx.open_stac(b_items, chunks={}),
        "shared, band": rx.open_stac(b_items, band_as_variable=False),
        "warped, eager": rx.open_stac(rumi_items, bands=["B04"], geobox=GEOBOX),
        "warped, dask": rx.open_stac(rumi_items, geobox=GEOBOX, chunks={}),
        "warped, solar_day": rx.open_stac(rumi_items, geobox=GEOBOX, groupby="solar_day",
                                          chunks={}, band_as_variable=False),
    }
    assert ours["shared, lazy"].B02.rumi.sources  # really the catalog path
    for name, ds in {**peers, **ours}.items():
        assert ds.time.dtype == np.dtype("datetime64[ns]"), name
    np.testing.assert_array_equal(ours["warped, dask"].time.values, odc.time.values)
    expected = [np.datetime64(s["when"].replace(tzinfo=None), "ns") for s in scenes
                if s["tile"] == "B"]
    np.testing.assert_array_equal(ours["shared, lazy"].time.values, expected)


# --- nodata, scale and offset: raw (odc-stac) or decoded (open_dataset) ---------------

#: Packing of the reflectance files: int16 samples, -9999 nodata, 1e-4 scale, -0.1 offset.
PACKING = {"_FillValue": -9999, "scale_factor": 1e-4, "add_offset": -0.1}
PACKED_BANDS = ["B04, Red, 665nm", "B08, NIR, 842nm"]
#: Their grid: UTM 33N, 60 m, 40 x 50 pixels.
PACKED_GRID = GeoBox((40, 50), Affine(60.0, 0.0, 500000.0, 0.0, -60.0, 5000000.0),
                     "EPSG:32633")


def write_packed(path: Path, k: int, when: dt.datetime, *, via: str) -> np.ndarray:
    """Write reflectances (NaN holes) with rx.to_rumi, packed per CF; return the floats.

    ``via="encoding"``: floats with the packing in ``encoding`` (as xarray decodes a
    netCDF); ``via="attrs"``: the raw int16 samples with the packing in ``attrs`` (as
    rioxarray's ``mask_and_scale=False`` gives them).
    """
    rng = np.random.default_rng(k)
    values = np.round(rng.uniform(-0.1, 0.9, (1, 2, *PACKED_GRID.shape.yx)), 4)
    values[:, 0, 5:15, 10 + k:30] = np.nan
    values[:, 1, 30:, :8] = np.nan
    coords = {"time": [np.datetime64(when.replace(tzinfo=None), "ns")],
              "band": PACKED_BANDS, **{str(n): c.values for n, c in
                                       PACKED_GRID.coordinates.items()}}
    da = xr.DataArray(values.astype(np.float32), dims=("time", "band", "y", "x"),
                      coords=coords).rio.write_crs(32633)
    if via == "encoding":
        da.encoding = {**PACKING, "dtype": "int16"}
    else:
        raw = np.round((values - PACKING["add_offset"]) / PACKING["scale_factor"])
        da = da.copy(data=np.where(np.isnan(values), -9999, raw).astype(np.int16))
        da.attrs.update(PACKING)
    rx.to_rumi(da, path, tile_size=16, progress=False)
    return values


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("packed")
    paths = [folder / "p0.rumi", folder / "p1.rumi"]
    write_packed(paths[0], 0, dt.datetime(2024, 5, 1, 10, 30, tzinfo=UTC), via="encoding")
    write_packed(paths[1], 1, dt.datetime(2024, 5, 11, 10, 30, tzinfo=UTC), via="attrs")
    return paths


def decoded_three_ways(items: list[pystac.Item], **kw: Any) -> tuple[xr.Dataset, ...]:
    """Return the raw load, its xr.decode_cf, and the mask_and_scale=True load."""
    raw = rx.open_stac(items, **kw)
    return raw, xr.decode_cf(raw), rx.open_stac(items, mask_and_scale=True, **kw)


def assert_same_numbers(a: xr.DataArray, b: Any) -> None:
    """Equal values, NaN at the same places, in the same dtype."""
    b = np.asarray(b)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(np.isnan(a.values), np.isnan(b))
    np.testing.assert_array_equal(a.values, b)


@pytest.mark.parametrize("chunks", [None, {}])
def test_mask_and_scale_equals_open_dataset_on_a_shared_grid(packed, chunks):
    items = rx.to_stac(packed)
    assert items[0].assets["data"].extra_fields["raster:bands"][0]["scale"] == 1e-4
    ref = xr.concat([xr.open_dataset(p, engine="rumi") for p in packed], "time")
    stored = xr.concat([xr.open_dataset(p, engine="rumi", mask_and_scale=False)
                        for p in packed], "time")
    assert ref.band_data.dtype == np.float32 and ref.band_data.isnull().any()
    raw, via_decode_cf, decoded = decoded_three_ways(items, chunks=chunks)
    assert decoded.B04.rumi.sources  # the catalog cube, not the reprojecting path
    for name in ("B04", "B08"):
        # raw: odc-stac's samples and nodata attribute, plus the CF attributes
        assert_same_numbers(raw[name], stored.band_data.sel(band=name))
        assert raw[name].attrs["nodata"] == -9999 == raw[name].attrs["_FillValue"]
        assert raw[name].rio.nodata == -9999 and raw[name].rio.encoded_nodata is None
        # decoded both ways: what open_dataset gives, NaN positions included
        assert_same_numbers(decoded[name], ref.band_data.sel(band=name))
        assert_same_numbers(via_decode_cf[name], ref.band_data.sel(band=name))
        assert np.isnan(decoded[name].attrs["nodata"])
        assert np.isnan(decoded[name].rio.nodata) and decoded[name].rio.encoded_nodata == -9999
        assert decoded[name].encoding["scale_factor"] == ref.band_data.encoding["scale_factor"]
    stacked = rx.open_stac(items, band_as_variable=False, mask_and_scale=True, chunks=chunks)
    assert_same_numbers(stacked.band_data, ref.band_data)


@pytest.mark.parametrize("chunks", [None, {"time": 1, "y": 32, "x": 48}])
def test_mask_and_scale_on_a_reprojecting_grid(packed, chunks):
    """Nearest onto a grid twice as fine, and onto a grid reaching past the files."""
    items = rx.to_stac(packed)
    ref = xr.concat([xr.open_dataset(p, engine="rumi") for p in packed], "time").band_data
    stored = xr.concat([xr.open_dataset(p, engine="rumi", mask_and_scale=False)
                        for p in packed], "time").band_data
    fine = GeoBox((80, 100), Affine(30.0, 0.0, 500000.0, 0.0, -30.0, 5000000.0), "EPSG:32633")
    padded = PACKED_GRID.pad(4)

    def on_fine(a: Any) -> np.ndarray:
        return np.repeat(np.repeat(np.asarray(a), 2, axis=-2), 2, axis=-1)

    def on_padded(a: Any, fill: Any) -> np.ndarray:
        a = np.asarray(a)
        out = np.full((*a.shape[:-2], a.shape[-2] + 8, a.shape[-1] + 8), fill, dtype=a.dtype)
        out[..., 4:-4, 4:-4] = a
        return out

    for gbox, expect in ((fine, on_fine), (padded, on_padded)):
        raw, via_decode_cf, decoded = decoded_three_ways(items, geobox=gbox, chunks=chunks)
        assert "rumi_header" not in decoded.B04.encoding  # the reprojecting path
        assert decoded.odc.geobox == gbox
        for name in ("B04", "B08"):
            band_ref, band_raw = ref.sel(band=name), stored.sel(band=name)
            args = () if expect is on_fine else (np.float32(np.nan),)
            raw_args = () if expect is on_fine else (np.int16(-9999),)
            assert_same_numbers(raw[name], expect(band_raw, *raw_args))
            assert_same_numbers(decoded[name], expect(band_ref, *args))
            assert_same_numbers(via_decode_cf[name], expect(band_ref, *args))
            assert raw[name].rio.nodata == -9999
            assert np.isnan(decoded[name].rio.nodata) and decoded[name].rio.encoded_nodata == -9999
        if chunks is None:
            assert isinstance(decoded.B04.variable._data, np.ndarray)  # loaded, as asked


def test_mask_and_scale_refuses_items_with_different_scales(packed, tmp_path):
    other = tmp_path / "other.rumi"
    write_packed(other, 2, dt.datetime(2024, 5, 21, 10, 30, tzinfo=UTC), via="encoding")
    found = read_sidecar(str(other))
    write_sidecar(other, dataclasses.replace(found, facts=dataclasses.replace(found.facts,
                                                                              scale=2e-4)))
    items = rx.to_stac([*packed, other])
    with pytest.raises(rx.RumiCatalogError, match=r"other\.rumi.*scale/offset"):
        rx.open_stac(items, mask_and_scale=True)
    with pytest.warns(UserWarning, match="no scale_factor/add_offset attribute"):
        raw = rx.open_stac(items)
    assert "scale_factor" not in raw.B04.attrs and raw.B04.attrs["_FillValue"] == -9999


# --- requests ------------------------------------------------------------------------


@pytest.fixture
def served(http_server, scenes, remote_dir):
    """The Rumi scenes and their sidecars published by the loopback HTTP server."""
    for s in scenes:
        shutil.copy(s["rumi"], remote_dir / s["rumi"].name)
        shutil.copy(str(s["rumi"]) + ".aux.json", remote_dir / (s["rumi"].name + ".aux.json"))
    items = rx.to_stac(rx.catalog([http_server.url(s["rumi"].name) for s in scenes]))
    http_server.reset()
    return items


def test_open_makes_no_request(http_server, served, tif_items):
    shared = [i for i in served if i.id.startswith("B_")]
    for opened in (rx.open_stac(served, geobox=GEOBOX, chunks={}),
                   rx.open_stac(served, bbox=(11.9, 45.05, 12.1, 45.15), chunks={"x": 64}),
                   rx.open_stac(shared, chunks={}), rx.open_stac(shared)):
        assert opened.sizes["time"] > 0
    assert http_server.requests() == []
    ours = rx.open_stac(served, geobox=GEOBOX, chunks={})
    xr.testing.assert_identical(computed(ours),
                                computed(odc_stac.load(tif_items, geobox=GEOBOX, chunks={})))


@pytest.mark.parametrize("chunks", [{}, {"x": 64, "y": 64}, {"band": 1}])
def test_bbox_load_requests_are_exactly_the_planned_reads(http_server, served, chunks):
    ds = rx.open_stac(served, bbox=(11.93, 45.07, 12.03, 45.14), crs="EPSG:32633",
                      resolution=60, chunks=chunks)
    plan = ds.rumi.explain()
    blocks = {(id(source), repr(key)): source.planned_reads(key)  # the chunks' reads
              for var in ds.data_vars.values() for source, key in getter_calls(var.data)}
    planned = [read for reads in blocks.values() for read, _ in reads]
    assert http_server.requests() == []
    rx.stats(reset=True)
    loaded = ds.compute()
    s = rx.stats()
    requests = len(http_server.requests())
    assert (plan.calls, plan.items, plan.frames, plan.decoded_bytes) == (
        s["calls"], s["items"], s["planned_frames"], s["bytes"])
    assert plan.calls == len(planned) and plan.items == sum(len(r.call.scenes) for r in planned)
    assert s["metadata"] == 0
    assert all(r.method == "GET" and r.status == 206 for r in http_server.requests())
    # Replaying the same windows with librumi's own read_many makes as many requests.
    http_server.reset()
    for read in planned:
        call = read.call
        rumi.read_many([read.cube.scenes[i].source for i in call.scenes],
                       [read.cube.scenes[i].header for i in call.scenes],
                       windows=[(r, c, call.height, call.width)
                                for r, c in zip(call.rows, call.cols, strict=True)],
                       time=list(call.times), bands=list(call.bands), pattern="n t b y x")
    assert requests == len(http_server.requests())
    assert loaded.B02.count() > 0


def test_graph_stores_the_items_once(rumi_items):
    ds = rx.open_stac(rumi_items, geobox=GEOBOX, chunks={"time": 1, "y": 64, "x": 64})
    graph = dict(ds.B02.data.__dask_graph__())
    sizes = sorted(len(pickle.dumps(task)) for task in graph.values())
    headers = sum(len(i.assets["data"].extra_fields["rumi:header"]) for i in rumi_items)
    assert sizes[-1] > headers  # the one key holding the load plan
    assert sizes[-2] < 2048, sizes[-4:]  # every chunk task refers to it


def test_query_planning_mode(rumi_items, tmp_path):
    """dask's array query planning gives the same values (run in a fresh interpreter)."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps({"type": "FeatureCollection",
                                 "features": [i.to_dict() for i in rumi_items]}))
    out = tmp_path / "qp.npy"
    code = (
        "import numpy as np, rumi_xarray as rx\n"
        "from odc.geo.geobox import GeoBox\n"
        "g = GeoBox.from_bbox((252000, 4991000, 276000, 5007000), 'EPSG:32633', resolution=50)\n"
        f"ds = rx.open_stac({str(items)!r}, geobox=g, chunks={{'time': 2}})\n"
        "assert ds.rumi.explain().calls > 0\n"
        f"np.save({str(out)!r}, ds.B03.compute().values)\n")
    env = {**os.environ, "DASK_ARRAY__QUERY_PLANNING": "True"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    expected = rx.open_stac(rumi_items, geobox=GEOBOX, chunks={}).B03.values
    np.testing.assert_array_equal(np.load(out), expected)


# --- errors --------------------------------------------------------------------------


def test_item_without_rumi_asset(tif_items, rumi_items):
    with pytest.raises(rx.RumiCatalogKeyError, match=f"STAC item '{tif_items[2].id}' has no "
                                                     f"Rumi asset.*'B02'"):
        rx.open_stac([*rumi_items[:2], tif_items[2]])


def test_item_without_projection(rumi_items):
    broken = rumi_items[3].to_dict()
    del broken["assets"]["data"]["proj:transform"]
    with pytest.raises(rx.RumiCatalogError, match=rf"STAC item '{rumi_items[3].id}'.*lacks "
                                                  r"projection information \(proj:transform\)"):
        rx.open_stac([rumi_items[0].to_dict(), broken])


def test_band_missing_from_one_item(scenes, rumi_items, tmp_path):
    s = scenes[1]
    odd = tmp_path / "two_bands.rumi"
    write_array(odd, s["data"][np.newaxis, :2], bands=BANDS[:2],
                time=[s["when"].replace(tzinfo=None)], transform=s["transform"], crs=s["epsg"],
                tile_size=64, progress=False)
    items = [*rumi_items[:3], *rx.to_stac([odd])]
    with pytest.raises(rx.RumiCatalogKeyError,
                       match=r"STAC item 'two_bands' .* has no band 'B04'; its bands: "
                             r"\['B02', 'B03'\]"):
        rx.open_stac(items, geobox=GEOBOX)
    ds = rx.open_stac(items, bands=["B02"], geobox=GEOBOX, chunks={})
    assert list(ds.data_vars) == ["B02"]


@pytest.mark.parametrize("empty", [[], pystac.ItemCollection([]),
                                   {"type": "FeatureCollection", "features": []}])
def test_empty_search(empty):
    with pytest.raises(rx.RumiCatalogError, match="no STAC items"):
        rx.open_stac(empty)


def test_bad_arguments(rumi_items):
    with pytest.raises(rx.RumiCatalogError, match="geobox= fixes the output grid"):
        rx.open_stac(rumi_items, geobox=GEOBOX, crs="EPSG:32633")
    for chunks in ({}, None):  # refused on every path, before anything is planned
        with pytest.raises(rx.RumiCatalogError,
                           match=r"resampling='sideways' is not a resampling odc-geo "
                                 r"knows \(Bad resampling parameter: sideways\); use one "
                                 r"of \[.*'bilinear'"):
            rx.open_stac(rumi_items, geobox=GEOBOX, resampling="sideways", chunks=chunks)
    with pytest.raises(rx.RumiCatalogError, match="resampling=5"):
        rx.open_stac(rumi_items, resampling=5)
    # odc-geo knows gauss; rasterio's reproject refuses it (ValueError in every chunk).
    with pytest.raises(rx.RumiCatalogError, match=r"resampling='gauss' is one GDAL computes "
                                                  r"overviews with.*'nearest'"):
        rx.open_stac(rumi_items, geobox=GEOBOX, resampling="gauss", chunks={})


# --- command line --------------------------------------------------------------------


def test_cli_writes_geojson_and_geoparquet(scenes, tmp_path, capsys):
    files = [str(s["rumi"]) for s in scenes]
    for name in ("items.json", "items.parquet"):
        assert main(["stac", *files, str(tmp_path / name), "--no-progress"]) == 0
        assert f"{len(files)} STAC item(s)" in capsys.readouterr().out
    collection = pystac.ItemCollection.from_file(str(tmp_path / "items.json"))
    assert [i.id for i in collection] == [s["name"] for s in scenes]
    a = rx.open_stac(tmp_path / "items.json", geobox=GEOBOX, chunks={})
    b = rx.open_stac(tmp_path / "items.parquet", geobox=GEOBOX, chunks={})
    c = rx.open_stac(collection, geobox=GEOBOX, chunks={})
    xr.testing.assert_identical(computed(a), computed(b))
    xr.testing.assert_identical(computed(a), computed(c))
    assert main(["stac", files[0], str(tmp_path / "items.txt")]) == 2
    assert "must end in .json or .parquet" in capsys.readouterr().err


def test_pixel_is_point_files(tmp_path):
    """proj:transform is corner based (as GDAL's); the file's centre origin round trips."""
    data = np.arange(2 * 1 * 30 * 40, dtype=np.uint8).reshape(2, 1, 30, 40)
    stored = (10.0, 0.0, 500005.0, 0.0, -10.0, 4000005.0)  # centre of pixel (0, 0)
    path = tmp_path / "point.rumi"
    write_array(path, data, bands=["v"], time=["2024-01-01", "2024-01-02"], transform=stored,
                crs=32633, pixel_is_point=True, tile_size=16, progress=False)
    (item,) = rx.to_stac([path])
    fields = item.assets["data"].extra_fields
    assert fields["proj:transform"] == [10.0, 0.0, 500000.0, 0.0, -10.0, 4000010.0]
    assert fields["rumi:pixel_is_point"] is True
    (source,) = parse_items([item])
    assert source.stored_transform == stored
    assert list(catalog_table([source])["transform"][0]) == list(rx.catalog([path])[
        "transform"][0])
    ds = rx.open_stac([item])
    cube = rx.open_catalog(rx.catalog([path]))
    np.testing.assert_array_equal(ds.x.values, cube.x.values)
    np.testing.assert_array_equal(ds.y.values, cube.y.values)
    np.testing.assert_array_equal(ds.v.values, data[:, 0])


@pytest.mark.filterwarnings("ignore:Unable to decode time axis:xarray.SerializationWarning")
def test_times_outside_nanoseconds_come_back_as_open_catalog_gives_them(tmp_path):
    # 1600 and 2300 lie outside datetime64[ns] (1677-2262): open_catalog decodes them as
    # xarray does (cftime), and open_stac must not wrap them into other dates.
    paths = []
    for year in (1600, 2300):
        path = tmp_path / f"y{year}.rumi"
        write_array(path, np.full((1, 1, 32, 32), year, np.uint16), bands=["a"],
                    time=[np.datetime64(f"{year}-05-01T10:30:00")],
                    transform=(10, 0, 500000, 0, -10, 5000000), crs=32633, tile_size=32,
                    progress=False)
        paths.append(path)
    expected = rx.open_catalog(rx.catalog(paths)).time.values
    assert [t.year for t in expected] == [1600, 2300]
    items = rx.to_stac(paths)
    for kw in ({}, {"resolution": 20}):  # one grid (catalog cube), and reprojected
        got = rx.open_stac(items, chunks={}, **kw).time.values
        np.testing.assert_array_equal(got, expected)
    # A number is not a STAC time (RFC 3339 text): refused, never read as nanoseconds.
    numeric = items[0].to_dict()
    numeric["properties"]["datetime"] = 1700000000
    with pytest.raises(rx.RumiCatalogError, match="number without units"):
        rx.open_stac([numeric])
