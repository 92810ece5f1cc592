"""Opening what ``rumi-xarray convert`` and ``rx.ingest`` read: GeoTIFF, netCDF, Zarr, Rumi.

GeoTIFFs and other GDAL rasters open through rioxarray, with their band
descriptions as band labels, their ``TIFFTAG_DATETIME`` as time and their
GDAL tags split as GDAL keeps them: the dataset's in ``attrs`` (where
rioxarray shows them), each band's in ``encoding`` (for the sidecar's
attributes); other formats through xarray's engines. Everything opens lazily.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions.attributes import BANDS_ENCODING
from rumi_xarray.conventions.bands import descriptions
from rumi_xarray.errors import (
    RumiArgumentError,
    RumiFileNotFoundError,
    RumiUnsupportedError,
    os_error,
)
from rumi_xarray.sources.location import locate

#: File name extensions opened with rioxarray (GDAL).
RASTERIO_SUFFIXES = (".tif", ".tiff", ".gtiff", ".vrt", ".jp2", ".img")


def guess_engine(source: str) -> str | None:
    """Return how ``convert`` opens a source: rasterio, rumi, zarr or xarray's guess.

    Parameters
    ----------
    source : str

    Returns
    -------
    str or None
        ``None`` lets xarray pick an installed engine.
    """
    path = source.rstrip("/")
    lower = path.lower()
    if lower.endswith(RASTERIO_SUFFIXES):
        return "rasterio"
    if lower.endswith(".rumi"):
        return "rumi"
    if lower.endswith(".zarr") or any(
            os.path.exists(os.path.join(path, marker)) for marker in ("zarr.json", ".zgroup")):
        return "zarr"
    return None


def open_source(source: str, *, engine: str | None = None, tile_size: int = 512,
                chunked: bool = True) -> xr.Dataset | xr.DataArray:
    """Open anything ``convert`` accepts, lazily.

    GeoTIFFs (and other GDAL rasters) go through ``rioxarray.open_rasterio``
    with tile-sized dask chunks, their bands named by their descriptions
    (rioxarray's band numbers where they have none) and their time taken from the
    ``TIFFTAG_DATETIME`` tag when present. Zarr stores open with their own
    chunks; other xarray engines open lazily and :func:`rumi_xarray.to_rumi`
    reads them a frame at a time.

    Parameters
    ----------
    source : str
        Path or URL.
    engine : str, optional
        ``"rasterio"``, ``"rumi"`` or an xarray engine name; guessed by default.
    tile_size : int, default 512
        Chunk size for GDAL sources.
    chunked : bool, default True
        Open as dask arrays (GDAL sources in tiles, Zarr in its chunks), so
        a writer reads a frame at a time; False opens lazily indexed arrays
        without dask, for a task that loads its source whole (an ingest
        task inside a dask worker must not start a dask computation).

    Returns
    -------
    xarray.Dataset or xarray.DataArray
    """
    if locate(source).local and not os.path.exists(source):
        raise os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{source}: no such file or directory", source)
    kind = engine or guess_engine(source)
    if kind == "rasterio":
        return _open_rasterio(source, tile_size if chunked else None)
    if kind == "rumi":
        return xr.open_dataset(source, engine="rumi", chunks={} if chunked else None)
    chunks: dict[str, int] | None = {} if kind == "zarr" and chunked else None
    try:
        return xr.open_dataset(source, engine=kind, chunks=chunks)
    except ValueError as exc:
        # Files xarray has no engine for may still be rasters GDAL reads.
        if engine is None and "did not find a match" in str(exc) and _has_rioxarray():
            return _open_rasterio(source, tile_size if chunked else None)
        raise RumiArgumentError(f"{source}: cannot open with xarray: {' '.join(str(exc).split())}"
                           ) from exc


def _has_rioxarray() -> bool:
    try:
        import rioxarray  # noqa: F401
    except ImportError:
        return False
    return True


def _open_rasterio(source: str, tile_size: int | None) -> xr.DataArray:
    try:
        import rioxarray
    except ImportError:
        raise RumiUnsupportedError(f"{source}: reading GDAL rasters needs rioxarray "
                           f"(pip install 'rumi-xarray[geo]')") from None
    chunks = None if tile_size is None else {"band": 1, "y": tile_size, "x": tile_size}
    opened = rioxarray.open_rasterio(source, chunks=chunks, mask_and_scale=False)
    if not isinstance(opened, xr.DataArray):
        raise RumiArgumentError(f"{source}: has several subdatasets; convert one of them "
                           f"(its GDAL subdataset name) at a time")
    described = descriptions(opened)
    # Unnamed bands keep rioxarray's integer labels (stored as "1", "2"...), as to_rumi does.
    named = opened.assign_coords(band=described) if described else opened
    dataset_tags, band_tags = gdal_tags(source)
    named.attrs = split_band_tags(opened.attrs, dataset_tags, band_tags[0] if band_tags else {})
    labels = [str(v) for v in np.atleast_1d(named["band"].values).tolist()]
    named.encoding[BANDS_ENCODING] = {label: tags for label, tags in
                                      zip(labels, band_tags, strict=False) if tags}
    stamp = opened.attrs.get("TIFFTAG_DATETIME")
    if isinstance(stamp, str) and "time" not in named.coords:
        when = _tiff_datetime(stamp)
        if when is not None:
            named = named.assign_coords(time=when)
    return named


#: What rioxarray adds to the tags it shows (not tags: left where it puts them).
_RIOXARRAY_OWN = ("_FillValue", "scale_factor", "add_offset", "scales", "offsets",
                  "long_name", "units")


def gdal_tags(source: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return a GDAL raster's tags: the dataset's, and each band's, as rioxarray parses them.

    The default metadata domain, as rioxarray reads it: band tags include
    the ``STATISTICS_*`` GDAL keeps in a ``.aux.xml`` beside the file.

    Parameters
    ----------
    source : str
        What ``rasterio.open`` takes.

    Returns
    -------
    tuple
        ``(dataset tags, [band 1 tags, band 2 tags, ...])``.
    """
    import rasterio  # type: ignore[import-untyped]

    with rasterio.open(source) as f:
        return (parse_tags(f.tags()), [parse_tags(f.tags(b)) for b in f.indexes])


def parse_tags(tags: Mapping[str, str]) -> dict[str, Any]:
    """Return GDAL tags as rioxarray shows them: numbers as numbers, ``{a,b}`` as arrays.

    Parameters
    ----------
    tags : mapping
        GDAL metadata items (texts).

    Returns
    -------
    dict

    Examples
    --------
    >>> parse_tags({"STATISTICS_MEAN": "99.5", "COUNT": "3", "NC_GLOBAL#title": "x"})
    {'STATISTICS_MEAN': 99.5, 'COUNT': 3, 'title': 'x'}
    """
    out: dict[str, Any] = {}
    for key, text in tags.items():
        name = key.split("NC_GLOBAL#")[-1]  # netCDF globals through GDAL, as rioxarray names them
        value: Any = _numeric(text)
        if text.startswith("{") and text.endswith("}"):
            try:
                parts = [float(v) for v in text.strip("{}").split(",") if v.strip()]
            except ValueError:
                parts = []
            if parts:
                value = np.asarray(parts)
        out[name] = value
    return out


def _numeric(text: str) -> Any:
    """Return a tag's text as an int, else a float, else the text (rioxarray's rule)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def split_band_tags(attrs: Mapping[Hashable, Any], dataset_tags: Mapping[str, Any],
                    first_band: Mapping[str, Any]) -> dict[Hashable, Any]:
    """Return rioxarray's ``attrs`` without the first band's tags it merged in.

    ``rioxarray.open_rasterio`` shows the dataset's tags and, over them, the
    first band's; the first band's (its ``STATISTICS_*``...) describe that
    band alone and are kept with it, the dataset's value where both have one.

    Parameters
    ----------
    attrs : mapping
        rioxarray's ``attrs``.
    dataset_tags, first_band : mapping
        The parsed tags (:func:`gdal_tags`).

    Returns
    -------
    dict
    """
    out = dict(attrs)
    for key in first_band:
        if key in _RIOXARRAY_OWN:
            continue
        if key in dataset_tags:
            out[key] = dataset_tags[key]
        else:
            out.pop(key, None)
    return out


def _tiff_datetime(stamp: str) -> np.datetime64 | None:
    """Return a ``TIFFTAG_DATETIME`` (``YYYY:MM:DD HH:MM:SS``) as datetime64, or None."""
    try:
        return np.datetime64(dt.datetime.strptime(stamp.strip(), "%Y:%m:%d %H:%M:%S"), "s")
    except ValueError:
        return None
