"""``rumi-xarray convert``: anything xarray opens (GeoTIFF, netCDF, Zarr, Rumi) -> Rumi."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.cli.common import (
    CommandError,
    add_command,
    add_progress,
    human_size,
    tile_size_arg,
)
from rumi_xarray.conventions.bands import descriptions
from rumi_xarray.conventions.facts import VALUE_COLUMNS
from rumi_xarray.sources.location import locate

#: File name extensions opened with rioxarray (GDAL).
RASTERIO_SUFFIXES = (".tif", ".tiff", ".gtiff", ".vrt", ".jp2", ".img")


def _error_bound(text: str) -> float | str:
    """Return an absolute bound as a number; relative bounds and recipes stay text."""
    try:
        value = float(text)
    except ValueError:
        return text
    if value < 0:
        raise argparse.ArgumentTypeError(f"the error bound must not be negative, got {text}")
    return value


def _dtype(text: str) -> np.dtype:
    """Parse ``--dtype``: a numpy type name such as float32 or int16."""
    try:
        return np.dtype(text)
    except TypeError:
        raise argparse.ArgumentTypeError(f"not a numpy dtype: {text!r}") from None


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``convert`` subcommand to the parser."""
    from rumi_xarray.native.frames import DEFAULT_CODEC, PATTERNS

    convert = add_command(
        commands, common, "convert", run, help="convert GeoTIFF, netCDF, Zarr... to Rumi",
        description="Write anything xarray opens (GeoTIFF through rioxarray, netCDF, Zarr, "
                    "Rumi) as a Rumi file. The source is read lazily, a frame at a time. "
                    "Nodata, scale, offset and units go to a sidecar beside the file "
                    "(DST.rumi.aux.json); packed data (e.g. int16 with a scale_factor) stay "
                    "packed unless --decode is given.")
    convert.add_argument("source", metavar="SRC")
    convert.add_argument("destination", metavar="DST.rumi")
    convert.add_argument("--tile-size", type=tile_size_arg, default=512, metavar="N",
                         help="square tile size in pixels (default: %(default)s)")
    convert.add_argument("--codec", default=DEFAULT_CODEC,
                         help="geozl recipe for lossless frames (default: %(default)s)")
    convert.add_argument("--frame", choices=sorted(PATTERNS), default="plane",
                         help="frame layout (default: %(default)s)")
    convert.add_argument("--error", type=_error_bound, default=None, metavar="BOUND",
                         help="lossy compression: absolute bound (e.g. 0.5) or relative "
                              "('1%%'); lossless by default")
    convert.add_argument("--variable", metavar="NAME",
                         help="the Dataset variable to write (default: band_data, the only "
                              "raster variable, or every raster variable as one band each)")
    convert.add_argument("--engine", metavar="ENGINE",
                         help="how to open SRC: 'rasterio' (rioxarray), 'rumi' or an xarray "
                              "engine such as netcdf4, h5netcdf, scipy, zarr (default: guessed)")
    convert.add_argument("--time", metavar="WHEN",
                         help="time of a source without one: ISO date/time, or START/END "
                              "for an interval")
    convert.add_argument("--crs", metavar="CRS",
                         help="CRS to record when the source has none or another one, "
                              "e.g. EPSG:4326 for a netCDF lat/lon grid")
    convert.add_argument("--band-dim", default="band", metavar="DIM",
                         help="band dimension of the source (default: %(default)s)")
    convert.add_argument("--time-dim", default="time", metavar="DIM",
                         help="time dimension of the source (default: %(default)s)")
    convert.add_argument("--decode", action="store_true",
                         help="store decoded values (scale and offset applied, NaN for "
                              "nodata) instead of the packed samples")
    convert.add_argument("--dtype", type=_dtype, default=None, metavar="DTYPE",
                         help="type of the stored samples, e.g. float32 with --decode "
                              "(default: the source's, packed or decoded)")
    convert.add_argument("--masks", choices=("nodata", "band", "ignore"), default="nodata",
                         help="a GDAL alpha band or per-dataset mask: as nodata where a value "
                              "is free (refused otherwise), as a band of its own, or dropped "
                              "(default: %(default)s)")
    convert.add_argument("--overwrite", action="store_true",
                         help="replace DST when it exists (refused by default)")
    convert.add_argument("--any-suffix", action="store_true",
                         help="write DST even if its name does not end in .rumi (refused by "
                              "default: other tools go by the suffix, and GDAL fails on a "
                              "Rumi file named .tif)")
    add_progress(convert)


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


def open_source(source: str, *, engine: str | None = None, tile_size: int = 512
                ) -> xr.Dataset | xr.DataArray:
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

    Returns
    -------
    xarray.Dataset or xarray.DataArray
    """
    if locate(source).local and not os.path.exists(source):
        raise CommandError(f"{source}: no such file or directory")
    kind = engine or guess_engine(source)
    if kind == "rasterio":
        return _open_rasterio(source, tile_size)
    if kind == "rumi":
        return xr.open_dataset(source, engine="rumi", chunks={})
    chunks: dict[str, int] | None = {} if kind == "zarr" else None
    try:
        return xr.open_dataset(source, engine=kind, chunks=chunks)
    except ValueError as exc:
        # Files xarray has no engine for may still be rasters GDAL reads.
        if engine is None and "did not find a match" in str(exc) and _has_rioxarray():
            return _open_rasterio(source, tile_size)
        raise CommandError(f"{source}: cannot open with xarray: {' '.join(str(exc).split())}"
                           ) from exc


def _has_rioxarray() -> bool:
    try:
        import rioxarray  # noqa: F401
    except ImportError:
        return False
    return True


def _open_rasterio(source: str, tile_size: int) -> xr.DataArray:
    try:
        import rioxarray
    except ImportError:
        raise CommandError(f"{source}: reading GDAL rasters needs rioxarray "
                           f"(pip install 'rumi-xarray[geo]')") from None
    opened = rioxarray.open_rasterio(source, chunks={"band": 1, "y": tile_size, "x": tile_size},
                                     mask_and_scale=False)
    if not isinstance(opened, xr.DataArray):
        raise CommandError(f"{source}: has several subdatasets; convert one of them "
                           f"(its GDAL subdataset name) at a time")
    described = descriptions(opened)
    # Unnamed bands keep rioxarray's integer labels (stored as "1", "2"...), as to_rumi does.
    named = opened.assign_coords(band=described) if described else opened
    stamp = opened.attrs.get("TIFFTAG_DATETIME")
    if isinstance(stamp, str) and "time" not in named.coords:
        when = _tiff_datetime(stamp)
        if when is not None:
            named = named.assign_coords(time=when)
    return named


def _tiff_datetime(stamp: str) -> np.datetime64 | None:
    """Return a ``TIFFTAG_DATETIME`` (``YYYY:MM:DD HH:MM:SS``) as datetime64, or None."""
    try:
        return np.datetime64(dt.datetime.strptime(stamp.strip(), "%Y:%m:%d %H:%M:%S"), "s")
    except ValueError:
        return None


def parse_time(text: str) -> Any:
    """Return ``--time``: an ISO instant, or a ``(start, end)`` pair for ``START/END``.

    Parameters
    ----------
    text : str

    Returns
    -------
    numpy.datetime64 or tuple of numpy.datetime64
    """
    def one(part: str) -> np.datetime64:
        try:
            return np.datetime64(part.strip().rstrip("Z"), "s")
        except ValueError:
            raise CommandError(f"--time {text!r}: {part!r} is not an ISO date or "
                               f"date-time") from None

    if "/" in text:
        start, end = text.split("/", 1)
        return (one(start), one(end))
    return one(text)


def _has_time(obj: xr.Dataset | xr.DataArray, time_dim: str) -> bool:
    return time_dim in obj.dims or time_dim in obj.coords


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray convert``; return the exit code."""
    from rumi_xarray import options
    from rumi_xarray.conventions.sidecar import read_sidecar
    from rumi_xarray.native.reads import header_info
    from rumi_xarray.write.to_rumi import check_suffix, to_rumi

    if os.path.abspath(args.source) == os.path.abspath(args.destination):
        raise CommandError(f"{args.destination}: the destination is the source")
    try:
        check_suffix(args.destination, args.any_suffix, writer="convert",
                     override="--any-suffix")
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if os.path.lexists(args.destination) and not args.overwrite:
        raise CommandError(f"{args.destination}: exists already; pass --overwrite to "
                           f"replace it")
    when = parse_time(args.time) if args.time else None
    started = time.perf_counter()
    obj = open_source(args.source, engine=args.engine, tile_size=args.tile_size)
    try:
        if when is None and not _has_time(obj, args.time_dim):
            raise CommandError(
                f"{args.source}: has no time coordinate; Rumi labels every time step: pass "
                f"--time DATE (e.g. 2024-05-01), or --time START/END for an interval")
        with options.set_options(progress=args.progress):
            header = to_rumi(obj, args.destination, tile_size=args.tile_size,
                             codec=args.codec, frame=args.frame, error=args.error,
                             band_dim=args.band_dim, time_dim=args.time_dim,
                             variable=args.variable, time=when, crs=args.crs,
                             encode_cf=not args.decode, dtype=args.dtype, masks=args.masks,
                             any_suffix=args.any_suffix)
    finally:
        obj.close()
    meta = header_info(header)
    shape = tuple(int(v) for v in meta.shape)
    decoded = int(np.prod(shape)) * int(meta.dtype.itemsize)
    size = os.path.getsize(args.destination)
    facts = read_sidecar(args.destination).facts.to_columns()
    values = "".join(f", {k} {facts[k]}" for k in VALUE_COLUMNS if facts[k] is not None)
    print(f"{args.destination}: {' x '.join(map(str, shape))} {meta.dtype.name}, "
          f"{meta.frames} frames, {human_size(size)} (ratio {decoded / size:.2f}), "
          f"{time.perf_counter() - started:.1f} s{values}")
    return 0


