"""``rumi-xarray convert``: anything xarray opens (GeoTIFF, netCDF, Zarr, Rumi) -> Rumi."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.cli.common import (
    CommandError,
    add_command,
    add_overviews,
    add_progress,
    human_size,
    tile_size_arg,
)
from rumi_xarray.conventions.facts import VALUE_COLUMNS
from rumi_xarray.write.sources import open_source


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
    add_overviews(convert)
    add_progress(convert)


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
                             any_suffix=args.any_suffix, overviews=args.overviews,
                             overview_resampling=args.overview_resampling)
    finally:
        obj.close()
    meta = header_info(header)
    shape = tuple(int(v) for v in meta.shape)
    decoded = int(np.prod(shape)) * int(meta.dtype.itemsize)
    size = os.path.getsize(args.destination)
    found = read_sidecar(args.destination)
    facts = found.facts.to_columns()
    values = "".join(f", {k} {facts[k]}" for k in VALUE_COLUMNS if facts[k] is not None)
    levels = "".join(f", overviews {'/'.join(map(str, found.overviews.factors))} "
                     f"({found.overviews.resampling})" for _ in [0] if found.overviews)
    print(f"{args.destination}: {' x '.join(map(str, shape))} {meta.dtype.name}, "
          f"{meta.frames} frames, {human_size(size)} (ratio {decoded / size:.2f}), "
          f"{time.perf_counter() - started:.1f} s{values}{levels}")
    return 0


