"""The ``rumi-xarray`` command (also ``python -m rumi_xarray``).

Subcommands: ``info`` (what a Rumi file holds), ``convert`` (anything xarray
opens -> Rumi), ``catalog`` (index many Rumi files into Parquet) and ``demo``
(write a synthetic time series and analyse it with dask).

Exit codes: 0 success, 1 runtime failure (one clear line on standard error;
``--debug`` shows the traceback), 2 usage error (argparse).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import xarray as xr

PROG = "rumi-xarray"

#: File name extensions opened with rioxarray (GDAL) by ``convert``.
RASTERIO_SUFFIXES = (".tif", ".tiff", ".gtiff", ".vrt", ".jp2", ".img")


class CommandError(Exception):
    """A runtime failure whose message is meant for the user as it is."""


# --- parser ---------------------------------------------------------------------


def _tile_size(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"tile size must be at most 65535, got {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _error_bound(text: str) -> float | str:
    """Return an absolute bound as a number; relative bounds and recipes stay text."""
    try:
        value = float(text)
    except ValueError:
        return text
    if value < 0:
        raise argparse.ArgumentTypeError(f"the error bound must not be negative, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``rumi-xarray`` and its subcommands.

    Returns
    -------
    argparse.ArgumentParser
    """
    from rumi_xarray import __version__
    from rumi_xarray.writer import DEFAULT_CODEC, PATTERNS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback on failure")
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common],
        description="Inspect, convert, catalog and demo Rumi rasters with xarray + dask.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = commands.add_parser(
        "info", parents=[common], help="describe a Rumi file or URL",
        description="Print dimensions, coordinates, CRS, transform, frame layout, tile size, "
                    "frame count, file size and compression ratio of a Rumi file.")
    info.add_argument("source", metavar="PATH_OR_URL")
    info.add_argument("--json", action="store_true", help="print one JSON object instead")
    info.set_defaults(run=run_info)

    convert = commands.add_parser(
        "convert", parents=[common], help="convert GeoTIFF, netCDF, Zarr... to Rumi",
        description="Write anything xarray opens (GeoTIFF through rioxarray, netCDF, Zarr, "
                    "Rumi) as a Rumi file. The source is read lazily, a frame at a time.")
    convert.add_argument("source", metavar="SRC")
    convert.add_argument("destination", metavar="DST.rumi")
    convert.add_argument("--tile-size", type=_tile_size, default=512, metavar="N",
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
    convert.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="show a progress bar (default: for large writes on a terminal)")
    convert.set_defaults(run=run_convert)

    catalog = commands.add_parser(
        "catalog", parents=[common], help="index Rumi files into a Parquet catalog",
        description="Read the header and labels of Rumi files (paths, globs or URLs) and "
                    "write one row per file to a Parquet table.")
    catalog.add_argument("sources", nargs="+", metavar="SOURCE")
    catalog.add_argument("output", metavar="OUT.parquet")
    catalog.set_defaults(run=run_catalog)

    demo = commands.add_parser(
        "demo", parents=[common], help="write a synthetic time series and analyse it",
        description="Write a synthetic Sentinel-2-like series (one file per date and one "
                    "multi-date file), then compute NDVI statistics with dask from the "
                    "multi-date file and check them against librumi's plain read.")
    demo.add_argument("--out", default="demo-data", metavar="DIR",
                      help="output directory (default: %(default)s)")
    demo.add_argument("--dates", type=_positive_int, default=24, metavar="N",
                      help="number of dates over one year (default: %(default)s)")
    demo.add_argument("--size", type=_positive_int, default=512, metavar="N",
                      help="image height and width in pixels (default: %(default)s)")
    demo.add_argument("--tile-size", type=_tile_size, default=256, metavar="N",
                      help="tile size of the written files (default: %(default)s)")
    demo.set_defaults(run=run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rumi-xarray`` and return its exit code.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success, 1 on a runtime failure, 2 on a usage error.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.run(args))
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): stop quietly,
        # and keep Python from complaining again when it flushes stdout.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        print(f"{PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, CommandError) or not text:
        return text or type(exc).__name__
    if isinstance(exc, (OSError, ValueError, TypeError, KeyError, RuntimeError)):
        return text
    return f"{type(exc).__name__}: {text}"


# --- info -----------------------------------------------------------------------


def describe(source: str) -> dict[str, Any]:
    """Return what a Rumi file holds, as plain Python values.

    Parameters
    ----------
    source : str
        Local path or URL.

    Returns
    -------
    dict
        ``source``, ``dims``, ``dtype``, ``coords`` (per coordinate: dims,
        dtype, first/last values), ``bands``, ``time_kind``, ``crs`` (EPSG
        code or None), ``crs_name``, ``transform`` (corner, rasterio order),
        ``pixel_is_point``, ``frame_layout``, ``index_order``, ``tile``,
        ``frames``, ``decoded_bytes``, ``frame_bytes`` (compressed frames),
        ``file_bytes`` (None when unknown, e.g. for URLs) and ``ratio``
        (decoded bytes over file bytes, or over frame bytes without a size).
    """
    from rumi_xarray import api, engine, sources

    if "://" not in source and not os.path.exists(source):
        raise CommandError(f"{source}: no such file")
    ds = api.open_dataset(source)
    var = ds["band_data"]
    header = ds.rumi.header
    meta = engine.header_info(header)
    height, width = var.sizes["y"], var.sizes["x"]
    scene = engine.Scene(sources.resolve(source), header)
    frame_bytes = sum(length for _, length in engine.plan_ranges(
        scene, None, None, 0, 0, height, width))
    decoded = int(np.prod(var.shape)) * var.dtype.itemsize
    file_bytes = os.path.getsize(source) if "://" not in source else None
    ref = ds.coords.get("spatial_ref")
    epsg = None if ref is None else ref.attrs.get("epsg")
    return {
        "source": source,
        "dims": {str(k): int(v) for k, v in var.sizes.items()},
        "dtype": str(var.dtype),
        "coords": {str(name): _coord_summary(c) for name, c in ds.coords.items()},
        "bands": [str(b) for b in np.atleast_1d(ds["band"].values).tolist()],
        "time_kind": "interval" if "time_bnds" in ds.variables else "instant",
        "crs": None if epsg is None else int(epsg),
        "crs_name": None if epsg is None else _crs_name(int(epsg)),
        "transform": None if ref is None else _corner(ref.attrs["GeoTransform"]),
        "pixel_is_point": var.attrs.get("AREA_OR_POINT") == "Point",
        "frame_layout": str(meta.frame_layout),
        "index_order": list(meta.index_order),
        "tile": [int(v) for v in meta.tile],
        "frames": int(meta.frames),
        "decoded_bytes": decoded,
        "frame_bytes": int(frame_bytes),
        "file_bytes": file_bytes,
        "ratio": decoded / (file_bytes or frame_bytes or 1),
    }


def _coord_summary(coord: xr.DataArray) -> dict[str, Any]:
    summary: dict[str, Any] = {"dims": [str(d) for d in coord.dims], "dtype": str(coord.dtype)}
    if coord.ndim == 1 and coord.size:
        values = coord.values
        summary.update(size=int(coord.size), first=_plain(values[0]), last=_plain(values[-1]))
    elif coord.ndim == 0:
        summary["value"] = _plain(coord.values[()])
    return summary


def _plain(value: Any) -> Any:
    """Return a JSON-friendly form of a coordinate value."""
    if isinstance(value, np.datetime64):
        return str(np.datetime_as_string(value, unit="s"))
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (int, float, str, bool)) else str(value)


def _crs_name(epsg: int) -> str | None:
    try:
        from pyproj import CRS

        return str(CRS.from_epsg(epsg).name)
    except Exception:  # a name is a nicety; the EPSG code is what matters
        return None


def _corner(geotransform: str) -> list[float]:
    c, a, b, f, d, e = (float(v) for v in geotransform.split())
    return [a, b, c, d, e, f]


def _size(n: float | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def format_info(facts: dict[str, Any]) -> str:
    """Return :func:`describe`'s facts as an aligned text block.

    Parameters
    ----------
    facts : dict

    Returns
    -------
    str
    """
    dims = ", ".join(f"{k}: {v}" for k, v in facts["dims"].items())
    lines = [facts["source"], f"  dimensions   {dims}  ({facts['dtype']})"]
    lines.append("  coordinates")
    for name, c in facts["coords"].items():
        where = f"({', '.join(c['dims'])})" if c["dims"] else "scalar"
        if "first" in c:
            span = c["first"] if c["size"] == 1 else f"{c['first']} .. {c['last']}"
            lines.append(f"    {name:<12} {where:<10} {c['dtype']:<15} {span}")
        else:
            lines.append(f"    {name:<12} {where:<10} {c['dtype']:<15} {c.get('value', '')}")
    lines.append(f"  bands        {' | '.join(facts['bands'])}")
    lines.append(f"  time         {facts['time_kind']}s")
    if facts["crs"] is None:
        lines.append("  crs          none (not georeferenced)")
    else:
        name = f" ({facts['crs_name']})" if facts["crs_name"] else ""
        lines.append(f"  crs          EPSG:{facts['crs']}{name}")
        kind = "PixelIsPoint" if facts["pixel_is_point"] else "PixelIsArea"
        coefficients = ", ".join(f"{v:.12g}" for v in facts["transform"])
        lines.append(f"  transform    ({coefficients})  corner origin, {kind}")
    tile = " x ".join(str(v) for v in facts["tile"])
    lines.append(f"  frames       {facts['frames']} of tile {tile}, layout "
                 f"'{facts['frame_layout']}', index order "
                 f"{' '.join(facts['index_order']) or '(one frame per tile)'}")
    denominator = "file" if facts["file_bytes"] is not None else "compressed frames"
    lines.append(f"  size         {_size(facts['file_bytes'])} on disk, "
                 f"{_size(facts['frame_bytes'])} of compressed frames, "
                 f"{_size(facts['decoded_bytes'])} decoded")
    lines.append(f"  ratio        {facts['ratio']:.2f} (decoded / {denominator})")
    return "\n".join(lines)


def run_info(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray info``.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
    """
    facts = describe(args.source)
    print(json.dumps(facts, indent=2) if args.json else format_info(facts))
    return 0


# --- convert --------------------------------------------------------------------


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
    (``band_1``... where a band has none) and their time taken from the
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
    if "://" not in source and not os.path.exists(source):
        raise CommandError(f"{source}: no such file or directory")
    kind = engine or guess_engine(source)
    if kind == "rasterio":
        return _open_rasterio(source, tile_size)
    if kind == "rumi":
        from rumi_xarray import api

        return api.open_dataset(source, chunks={})
    chunks = {} if kind == "zarr" else None
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
    named = opened.assign_coords(band=band_names_from_descriptions(opened))
    stamp = opened.attrs.get("TIFFTAG_DATETIME")
    if isinstance(stamp, str) and "time" not in named.coords:
        when = _tiff_datetime(stamp)
        if when is not None:
            named = named.assign_coords(time=when)
    return named


def band_names_from_descriptions(da: xr.DataArray) -> list[str]:
    """Return band names from GDAL band descriptions (rioxarray's ``long_name``).

    Parameters
    ----------
    da : xarray.DataArray
        As opened by ``rioxarray.open_rasterio``: a ``band`` dimension
        numbered from 1 and ``long_name`` = one description per band (a text
        for a single band).

    Returns
    -------
    list of str
        The description, or ``band_<n>`` where there is none; a description
        repeated across bands gets `` (<n>)`` appended so names stay unique.
    """
    n = da.sizes.get("band", 1)
    described = da.attrs.get("long_name")
    if isinstance(described, str):
        described = [described] if n == 1 else [None] * n
    if not isinstance(described, (list, tuple)) or len(described) != n:
        described = [None] * n
    names = [str(d).strip() if d is not None and str(d).strip() else f"band_{i + 1}"
             for i, d in enumerate(described)]
    repeated = {name for name in names if names.count(name) > 1}
    return [f"{name} ({i + 1})" if name in repeated else name for i, name in enumerate(names)]


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


def run_convert(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray convert``.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
    """
    from rumi_xarray import engine
    from rumi_xarray.writer import to_rumi

    if os.path.abspath(args.source) == os.path.abspath(args.destination):
        raise CommandError(f"{args.destination}: the destination is the source")
    when = parse_time(args.time) if args.time else None
    started = time.perf_counter()
    obj = open_source(args.source, engine=args.engine, tile_size=args.tile_size)
    try:
        if when is None and not _has_time(obj, args.time_dim):
            raise CommandError(
                f"{args.source}: has no time coordinate; Rumi labels every time step: pass "
                f"--time DATE (e.g. 2024-05-01), or --time START/END for an interval")
        header = to_rumi(obj, args.destination, tile_size=args.tile_size, codec=args.codec,
                         frame=args.frame, error=args.error, band_dim=args.band_dim,
                         time_dim=args.time_dim, variable=args.variable, time=when,
                         crs=args.crs, progress=args.progress)
    finally:
        obj.close()
    meta = engine.header_info(header)
    shape = tuple(int(v) for v in meta.shape)
    decoded = int(np.prod(shape)) * int(meta.dtype.itemsize)
    size = os.path.getsize(args.destination)
    print(f"{args.destination}: {' x '.join(map(str, shape))} {meta.dtype.name}, "
          f"{meta.frames} frames, {_size(size)} (ratio {decoded / size:.2f}), "
          f"{time.perf_counter() - started:.1f} s")
    return 0


# --- catalog --------------------------------------------------------------------


def run_catalog(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray catalog``: one Parquet row per Rumi file.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
    """
    if not args.output.lower().endswith((".parquet", ".pq")):
        # The last argument is the output: refusing other names keeps a
        # forgotten OUT from overwriting the last source.
        print(f"{PROG} catalog: error: the last argument is the output and must end in "
              f".parquet, got {args.output!r}", file=sys.stderr)
        return 2
    try:
        # By module path: the package namespace may re-export the function
        # under the same name.
        catalog_module = importlib.import_module("rumi_xarray.catalog")
    except ModuleNotFoundError as exc:
        if exc.name != "rumi_xarray.catalog":
            raise
        raise CommandError("this installation of rumi_xarray has no catalog support "
                           "(module rumi_xarray.catalog)") from None
    started = time.perf_counter()
    table = catalog_module.catalog(list(args.sources))
    _write_atomically(args.output, lambda path: table.to_parquet(path, index=False))
    print(f"{args.output}: {len(table)} file(s) cataloged in "
          f"{time.perf_counter() - started:.1f} s")
    return 0


def _write_atomically(path: str, write: Callable[[str], Any]) -> None:
    """Write through a temporary file beside ``path``, replacing it only on success."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CommandError(f"{path}: directory {directory} does not exist")
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    except ImportError as exc:
        raise CommandError(f"{path}: writing Parquet needs pyarrow "
                           f"(pip install 'rumi-xarray[catalog]'): {exc}") from exc
    finally:
        if os.path.lexists(temporary):
            os.remove(temporary)


# --- demo -----------------------------------------------------------------------

SEASONS = ("DJF", "MAM", "JJA", "SON")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: Blue reflectance (x 10 000) above which a pixel is taken as cloud.
CLOUD_BLUE = 2000


def run_demo(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray demo``.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
    """
    demo(args.out, n_dates=args.dates, size=args.size, tile_size=args.tile_size)
    return 0


def demo(out: str, *, n_dates: int = 24, size: int = 512, tile_size: int = 256,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Write a synthetic series, analyse it lazily with dask and check the results.

    Writes ``scenes/S2_33UUP_<date>.rumi`` (one file per date), the
    multi-date ``S2_33UUP_<year>.rumi`` and ``land_cover_<year>.rumi`` (a
    one-band map whose time is the year as an interval) into ``out``. Then
    opens the multi-date file with ``rumi_xarray.open_dataset(...,
    chunks={})`` and computes, in one dask pass, NDVI means per month, mean
    NDVI per land cover and season (clouds masked) and one pixel's NDVI time
    series, and compares them with the same numbers computed in numpy from
    one plain ``rumi.read`` of the file.

    Parameters
    ----------
    out : str
        Output directory, created if needed.
    n_dates, size, tile_size : int
        Dates over one year, image size and tile size.
    echo : callable, default print
        Receives each line of the report.

    Returns
    -------
    dict
        What was found: ``series`` (path), ``shape``, ``crs``, ``seasonal``
        (class -> season -> mean NDVI), ``monthly`` (month -> mean NDVI),
        ``pixel`` (NDVI series), ``reads`` (``rumi_xarray.stats()`` of the
        analysis), ``cloudy`` (dates), ``seconds``.

    Raises
    ------
    RuntimeError
        When a dask result differs from librumi's plain read.
    """
    from rumi_xarray import synthetic

    started = time.perf_counter()
    scene = synthetic.scene_series(n_dates, size)
    year = int(str(scene["time"].values[0])[:4])
    paths = _demo_write(scene, out, year, tile_size)
    written = time.perf_counter() - started
    files = [*paths["scenes"], paths["series"], paths["land_cover"]]
    echo(f"rumi-xarray demo: {n_dates} dates x {scene.sizes['band']} bands x {size} x {size} "
         f"uint16, tile {tile_size}")
    echo(f"  wrote {len(paths['scenes'])} single-date files to "
         f"{os.path.join(out, 'scenes')}, {os.path.basename(paths['series'])} and "
         f"{os.path.basename(paths['land_cover'])}: "
         f"{_size(sum(os.path.getsize(f) for f in files))} in {written:.1f} s")
    found = _demo_analyse(paths["series"], scene, echo)
    found["seconds"] = time.perf_counter() - started
    echo(f"  done in {found['seconds']:.1f} s")
    return found


def _demo_write(scene: xr.Dataset, out: str, year: int, tile_size: int) -> dict[str, Any]:
    from rumi_xarray import synthetic
    from rumi_xarray.writer import to_rumi

    scenes_dir = os.path.join(out, "scenes")
    os.makedirs(scenes_dir, exist_ok=True)
    scene_paths = []
    for i in range(scene.sizes["time"]):
        # One time step keeps a scalar time coordinate: a single-date file.
        step = scene["band_data"].isel(time=i)
        day = np.datetime_as_string(step["time"].values, unit="D").replace("-", "")
        path = os.path.join(scenes_dir, f"S2_33UUP_{day}.rumi")
        to_rumi(step, path, tile_size=tile_size, progress=False)
        scene_paths.append(path)
    series = os.path.join(out, f"S2_33UUP_{year}.rumi")
    to_rumi(scene, series, tile_size=tile_size, progress=False)
    land_cover = os.path.join(out, f"land_cover_{year}.rumi")
    classes = ", ".join(f"{k} {name}" for k, name in enumerate(synthetic.LAND_COVER))
    to_rumi(scene["land_cover"].expand_dims(band=[f"land cover ({classes})"]), land_cover,
            tile_size=tile_size, progress=False,
            time=(np.datetime64(f"{year}-01-01"), np.datetime64(f"{year + 1}-01-01")))
    return {"scenes": scene_paths, "series": series, "land_cover": land_cover}


def _demo_analyse(series_path: str, scene: xr.Dataset, echo: Callable[[str], None]
                  ) -> dict[str, Any]:
    """Compute the demo's statistics with dask, and again in numpy from one plain read."""
    import dask

    import rumi_xarray
    from rumi_xarray import engine, synthetic

    bands = synthetic.BANDS
    rumi_xarray.stats(reset=True)
    started = time.perf_counter()
    ds = rumi_xarray.open_dataset(series_path, chunks={})
    data = ds["band_data"]
    red = data.sel(band=bands["red"]).astype(np.float32)
    nir = data.sel(band=bands["nir"]).astype(np.float32)
    ndvi = (nir - red) / (nir + red)
    clear = ndvi.where(data.sel(band=bands["blue"]) < CLOUD_BLUE)
    classes = xr.DataArray(scene["land_cover"].values, dims=("y", "x"))
    row, col = _crop_pixel(scene["land_cover"].values)
    lazy = {
        "monthly": clear.groupby("time.month").mean(),
        "pixel": ndvi.isel(y=row, x=col),
        "cloudy": (data.sel(band=bands["blue"]) >= CLOUD_BLUE).mean(("y", "x")),
        **{f"class_{k}": clear.where(classes == k).groupby("time.season").mean(...)
           for k in range(len(synthetic.LAND_COVER))},
    }
    (computed,) = dask.compute(lazy)
    seconds = time.perf_counter() - started
    reads = rumi_xarray.stats()

    truth = _demo_truth(engine, ds, series_path, (row, col))
    checks = _demo_check(computed, truth, scene)

    ref = ds["spatial_ref"].attrs
    crs = f"EPSG:{ref['epsg']} ({_crs_name(int(ref['epsg'])) or 'unknown'})"
    echo(f"  opened {os.path.basename(series_path)} with chunks={{}}: "
         f"{dict(data.sizes)}, {crs}, {abs(float(ds['x'][1] - ds['x'][0])):g} m pixels, "
         f"{len(data.chunks[0]) * len(data.chunks[1]) * len(data.chunks[2]) * len(data.chunks[3])}"
         f" chunks (one per frame)")
    cloudy_dates = [np.datetime_as_string(t, unit="D")
                    for t, f in zip(ds["time"].values, computed["cloudy"].values, strict=True)
                    if f > 0.2]
    echo(f"  cloudy dates (blue > {CLOUD_BLUE / 10000:g} on > 20% of pixels): "
         f"{', '.join(cloudy_dates) or 'none'}")
    seasonal = _seasonal_table(computed, echo)
    monthly = {MONTHS[int(m) - 1]: float(v) for m, v in zip(
        computed["monthly"]["month"].values,
        computed["monthly"].mean(("y", "x")).values, strict=True)}
    echo("  mean NDVI per month: " + "  ".join(f"{m} {v:.2f}" for m, v in monthly.items()))
    pixel = [float(v) for v in computed["pixel"].values]
    echo(f"  NDVI time series of crop pixel (row {row}, col {col}): "
         + " ".join(f"{v:.2f}" for v in pixel))
    echo(f"  native reads: {reads['calls']} call(s) for {reads['items']} window(s), "
         f"{reads['frames']} frame(s), {_size(reads['bytes'])} decoded, in {seconds:.1f} s")
    echo(f"  checked against one plain rumi.read: {checks}")
    return {"series": series_path, "shape": tuple(int(n) for n in data.shape), "crs": crs,
            "seasonal": seasonal, "monthly": monthly, "pixel": pixel, "reads": reads,
            "cloudy": cloudy_dates}


def _crop_pixel(classes: np.ndarray) -> tuple[int, int]:
    """Return a crop pixel near the image centre (the most seasonal NDVI)."""
    rows, cols = np.nonzero(classes == 2)
    if rows.size == 0:
        return classes.shape[0] // 2, classes.shape[1] // 2
    centre = np.array(classes.shape) / 2
    nearest = int(np.argmin((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2))
    return int(rows[nearest]), int(cols[nearest])


def _demo_truth(engine: Any, ds: xr.Dataset, path: str, pixel: tuple[int, int]
                ) -> dict[str, Any]:
    """Return the file's samples through one plain ``rumi.read`` (via the engine)."""
    whole = engine.reference_read(engine.Scene(os.path.abspath(path), ds.rumi.header))
    return {"data": whole, "pixel": pixel}


def _demo_check(computed: dict[str, Any], truth: dict[str, Any], scene: xr.Dataset) -> str:
    """Recompute the dask results in numpy from the plain read; raise on any mismatch."""
    from rumi_xarray import synthetic

    data = truth["data"]
    if not np.array_equal(data, scene["band_data"].values):
        raise RuntimeError("demo check failed: the file does not hold the samples written")
    names = list(scene["band"].values)
    red = data[:, names.index(synthetic.BANDS["red"])].astype(np.float32)
    nir = data[:, names.index(synthetic.BANDS["nir"])].astype(np.float32)
    ndvi = (nir - red) / (nir + red)
    row, col = truth["pixel"]
    if not np.array_equal(ndvi[:, row, col], computed["pixel"].values):
        raise RuntimeError("demo check failed: the pixel time series differs from rumi.read")
    clear = np.where(data[:, names.index(synthetic.BANDS["blue"])] < CLOUD_BLUE, ndvi, np.nan)
    months = scene["time"].dt.month.values
    worst = 0.0
    for month, dask_map in zip(computed["monthly"]["month"].values,
                               computed["monthly"].values, strict=True):
        with warnings.catch_warnings():
            # Pixels cloudy on every date of a month have no mean (NaN), as in dask.
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanmean(clear[months == month], axis=0)
        if not np.array_equal(np.isnan(expected), np.isnan(dask_map)):
            raise RuntimeError(f"demo check failed: month {month} masks differ")
        diff = np.nanmax(np.abs(expected - dask_map)) if np.isfinite(expected).any() else 0.0
        worst = max(worst, float(diff))
    # Means are sums in a different order in dask and numpy: float32 rounding only.
    if worst > 1e-5:
        raise RuntimeError(f"demo check failed: monthly means differ by up to {worst:.2e}")
    return (f"samples and pixel series identical, monthly means within {worst:.1e} "
            f"(float32 summation order)")


def _seasonal_table(computed: dict[str, Any], echo: Callable[[str], None]
                    ) -> dict[str, dict[str, float]]:
    from rumi_xarray import synthetic

    echo("  mean NDVI by land cover and season (clouds masked):")
    echo("    " + " " * 8 + "".join(f"{s:>8}" for s in SEASONS))
    table: dict[str, dict[str, float]] = {}
    for k, cover in enumerate(synthetic.LAND_COVER):
        result = computed[f"class_{k}"]
        values = dict(zip(result["season"].values.tolist(), result.values.tolist(),
                          strict=True))
        table[cover] = {s: float(values[s]) for s in SEASONS if s in values}
        echo(f"    {cover:<8}" + "".join(
            f"{table[cover][s]:>8.2f}" if s in table[cover] else f"{'-':>8}" for s in SEASONS))
    return table
