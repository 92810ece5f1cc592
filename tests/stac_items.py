"""STAC Items of GeoTIFF scenes, as rio-stac writes them: shared by tests and benchmarks.

The STAC tests compare ``rx.open_stac`` with ``odc.stac.load`` on the same scenes
written as GeoTIFFs; the STAC benchmark times the same comparison. Both describe
the GeoTIFFs with this one builder, so the benchmark measures what the tests check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pystac
from affine import Affine
from odc.geo.geobox import GeoBox
from pystac.extensions.eo import Band, EOExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import RasterBand, RasterExtension


def geotiff_item(name: str, when: dt.datetime, epsg: int, transform: Sequence[float],
                 shape: tuple[int, int], tifs: Mapping[str, Any], band_texts: Sequence[str],
                 nodata: float, href: Callable[[Any], str] = str,
                 data_type: str = "uint16") -> pystac.Item:
    """Return an Item with one COG asset per band, with proj, raster and eo fields.

    Parameters
    ----------
    name : str
        Item id.
    when : datetime.datetime
        Acquisition time (timezone-aware).
    epsg : int
    transform : sequence of float
        Corner transform, rasterio order.
    shape : (height, width)
    tifs : mapping
        Short band name -> GeoTIFF path (asset key = short name).
    band_texts : sequence of str
        Descriptions, in the order of ``tifs``.
    nodata : float
    href : callable, default str
        Path -> asset href (e.g. a loopback URL).
    data_type : str

    Returns
    -------
    pystac.Item
    """
    h, w = shape
    gbox = GeoBox((h, w), Affine(*transform), f"EPSG:{epsg}")
    footprint = gbox.footprint("epsg:4326", npoints=16)
    item = pystac.Item(name, geometry=footprint.json, bbox=list(footprint.boundingbox),
                       datetime=when, properties={})
    for short, text in zip(tifs, band_texts, strict=True):
        asset = pystac.Asset(href(tifs[short]), media_type=pystac.MediaType.COG,
                             roles=["data"])
        item.add_asset(short, asset)
        ProjectionExtension.ext(asset, add_if_missing=True).apply(
            code=f"EPSG:{epsg}", transform=list(transform), shape=[h, w])
        RasterExtension.ext(asset, add_if_missing=True).apply(
            bands=[RasterBand.create(nodata=nodata, data_type=data_type)])
        EOExtension.ext(asset, add_if_missing=True).apply(
            bands=[Band.create(name=short, description=text)])
    return item
