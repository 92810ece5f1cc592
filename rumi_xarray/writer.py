"""Write Rumi files: compress frames with geozl, index them with rumi.

Two levels:

- :func:`write_array` is the array-level core: a ``(time, band, y, x)`` numpy
  or dask array plus labels in, a ``.rumi`` file and its header out. Dask input
  is rechunked to whole frames and compressed frame by frame in parallel dask
  tasks, so the whole array is never held in memory, only its compressed
  frames (which ``rumi.write`` needs all at once to lay out the file).
- :func:`to_rumi` writes any xarray object: it finds the raster variable,
  derives band names, time steps (instants or intervals), the affine
  transform, the EPSG code and PixelIsArea/PixelIsPoint from xarray, CF and
  rioxarray conventions, checks everything Rumi cannot store *before*
  compressing a frame, and hands a lazily chunked array to :func:`write_array`.

Every write goes to a hidden temporary file in the destination directory that
replaces the destination only once complete, so no failure (bad input,
compression error, interrupt) ever leaves a partial or clobbered file behind.
"""

from __future__ import annotations

import math
import os
import secrets
import sys
import threading
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import geozl
import numpy as np
import rumi
import xarray as xr

DEFAULT_CODEC = "planar>zigzag>zstd"

#: Frame patterns by name: ``plane`` stores one tile of one band at one time
#: step per frame, ``cell`` one tile with every band and time step.
PATTERNS = {
    "plane": "t b (row h) (col w) -> row col t b (h w)",
    "plane-bt": "t b (row h) (col w) -> row col b t (h w)",
    "cell": "t b (row h) (col w) -> row col (t b h w)",
    "cell-hwb": "t b (row h) (col w) -> row col (h w b t)",
}


CANONICAL = ("t", "b", "h", "w")

#: Sample types Rumi stores, by numpy dtype (any byte order).
SUPPORTED_DTYPES = tuple(np.dtype(d) for d in (
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "float32", "float64", "complex64", "complex128"))

#: With ``progress=None``, writes of at least this many decoded bytes show a
#: progress bar when standard error is a terminal (about a second of
#: compression per core and up).
PROGRESS_BYTES = 256 * 2**20

_Y_NAMES = ("y", "lat", "latitude")
_X_NAMES = ("x", "lon", "longitude")


@dataclass(frozen=True)
class FrameSpec:
    """Where one frame's samples come from and in which axis order they are stored.

    ``frame = data[time, band, rows, cols]``, squeezed to and ordered as ``axes``.
    """

    time: slice
    band: slice
    rows: slice
    cols: slice
    axes: tuple[str, ...]


def frame_specs(shape: tuple[int, int, int, int], dtype: np.dtype, pattern: str,
                tile_size: int) -> tuple[Any, list[FrameSpec]]:
    """Return rumi's frame table for a layout, and each frame's source block.

    The table is built on a zero-stride placeholder, so it costs one tile of
    memory whatever the raster size; only its geometry is used.

    Parameters
    ----------
    shape : tuple
        ``(time, band, y, x)``.
    dtype : numpy.dtype
    pattern : str
        A rumi frame pattern over input axes ``t b (row h) (col w)``.
    tile_size : int

    Returns
    -------
    table : rumi.FrameTable
    specs : list of FrameSpec
    """
    t, b, _, _ = shape
    placeholder = np.broadcast_to(np.zeros((), dtype=dtype), shape)
    table = rumi.frames(placeholder, pattern, tile_size=tile_size)
    axes = tuple(table.layout.split())
    specs = []
    for frame in table:
        dims = dict(zip(axes, frame.shape, strict=True))
        y0, x0 = frame.row * tile_size, frame.col * tile_size
        specs.append(FrameSpec(
            time=slice(0, t) if "t" in axes else _one(frame, "time"),
            band=slice(0, b) if "b" in axes else _one(frame, "band"),
            rows=slice(y0, y0 + dims["h"]), cols=slice(x0, x0 + dims["w"]), axes=axes))
    return table, specs


def _one(frame: Any, axis: str) -> slice:
    """Return the single band/time step a frame holds (0 when the axis is singleton)."""
    try:
        i = int(getattr(frame, axis))
    except AttributeError:  # a singleton axis is not walked by the frame index
        i = 0
    return slice(i, i + 1)


def frame_block(block: np.ndarray, axes: tuple[str, ...]) -> np.ndarray:
    """Return a frame's samples in stored order from its ``(t, b, h, w)`` block.

    Parameters
    ----------
    block : numpy.ndarray
        ``data[spec.time, spec.band, spec.rows, spec.cols]``.
    axes : tuple of str
        The frame's stored axis order.

    Returns
    -------
    numpy.ndarray
        C-contiguous.
    """
    drop = tuple(i for i, a in enumerate(CANONICAL) if a not in axes)
    present = [a for a in CANONICAL if a in axes]
    squeezed = block.squeeze(axis=drop) if drop else block
    return np.ascontiguousarray(squeezed.transpose([present.index(a) for a in axes]))


class Compressor:
    """geozl compression with one graph per (thread, frame shape).

    geozl graphs are not thread-safe and fix the row width, so each thread
    keeps its own, keyed by shape (edge frames are smaller). A lossy graph
    also fixes the value domain (largest magnitude, sign) it accepts, so lossy
    frames each get a graph built from their own samples: building one costs
    well under a millisecond against several for compressing the frame.

    Parameters
    ----------
    codec : str
        geozl graph recipe, e.g. ``"planar>zigzag>zstd"``.
    error : int, float or str, optional
        geozl error bound (absolute number, ``"1%"`` relative, or a recipe);
        ``None`` (or 0) is lossless.
    """

    def __init__(self, codec: str = DEFAULT_CODEC, error: Any = None) -> None:
        self.codec = codec
        self.error = error
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {"codec": self.codec, "error": self.error}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["codec"], state["error"])  # type: ignore[misc]

    @property
    def lossy(self) -> bool:
        """Return whether frames are compressed within an error bound."""
        return self.error is not None and not (
            isinstance(self.error, (int, float)) and self.error == 0)

    def __call__(self, block: np.ndarray) -> bytes:
        """Compress one frame and return its payload."""
        arr = _storable(block)
        if self.lossy:
            return geozl.compress(arr, graph=geozl.graph(arr, self.codec, error=self.error))
        graphs = getattr(self._local, "graphs", None)
        if graphs is None:
            graphs = self._local.graphs = {}
        key = (arr.shape, arr.dtype.str)
        graph = graphs.get(key)
        if graph is None:
            try:
                graph = geozl.graph(arr, self.codec)
            except RuntimeError:
                # Lossless recipes that need a wider or signed domain do not
                # apply to every dtype (bool, complex...); fall back to the
                # generic numeric graph, which takes any width.
                graph = geozl.graph(arr, "id>zstd")
            graphs[key] = graph
        return geozl.compress(arr, graph=graph)


def _storable(block: np.ndarray) -> np.ndarray:
    """Return a native-byte-order, C-contiguous array of a width geozl accepts.

    Big-endian input is byte-swapped (the values are unchanged). complex128
    samples are 16 bytes, wider than any OpenZL numeric stream, so they are
    compressed as pairs of float64; the frame's bytes, which is what Rumi
    stores and decodes, are the same.
    """
    arr = np.ascontiguousarray(block)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype == np.complex128:
        arr = arr.view(np.float64)
    return arr


def write_array(path: str | os.PathLike[str], data: Any, *, bands: Sequence[str],
                time: Sequence[Any], transform: Sequence[float] | None = None,
                crs: Any = None, pixel_is_point: bool = False, tile_size: int = 512,
                codec: str = DEFAULT_CODEC, error: Any = None, frame: str = "plane",
                pattern: str | None = None, progress: bool = False) -> bytes:
    """Write a ``(time, band, y, x)`` array as a Rumi file.

    Parameters
    ----------
    path : str or os.PathLike
        Local output path, replaced atomically. Nothing is left behind on
        failure.
    data : numpy.ndarray or dask.array.Array
        Four axes ``(time, band, y, x)``. A dask array is rechunked to whole
        frames and compressed frame by frame in dask tasks, never
        materialised whole.
    bands : sequence of str
        One unique, non-empty text per band.
    time : sequence
        One instant (date, datetime, ISO text, datetime64) or ``(start, end)``
        interval per time step.
    transform : sequence of float, optional
        Six coefficients in rasterio order; requires ``crs``.
    crs : int, str or pyproj.CRS, optional
        EPSG code.
    pixel_is_point : bool, default False
    tile_size : int, default 512
    codec : str
        geozl graph recipe.
    error : int, float or str, optional
        Lossy bound; ``None`` is lossless.
    frame : {"plane", "plane-bt", "cell", "cell-hwb"}
        Named frame layout (ignored when ``pattern`` is given).
    pattern : str, optional
        A rumi frame pattern over ``t b (row h) (col w)``.
    progress : bool
        Show a progress bar while compressing dask input.

    Returns
    -------
    bytes
        The external header.
    """
    target = _target(path)
    if data.ndim != 4:
        raise ValueError(f"{target}: write_array takes (time, band, y, x), got {data.ndim} axes")
    pattern = _pattern(target, frame, pattern)
    _check_tile_size(target, tile_size)
    dtype = _check_dtype(target, np.dtype(data.dtype))
    with _atomic(target) as temporary:
        try:
            table, specs = frame_specs(tuple(int(n) for n in data.shape), dtype, pattern,
                                       tile_size)
            payloads = _compress_all(data, specs, Compressor(codec, error), progress)
            table["compressed"] = payloads
            del payloads
            _, header = rumi.write(temporary, table, bands=list(bands), time=list(time),
                                   transform=None if transform is None else tuple(transform),
                                   crs=crs, pixel_is_point=pixel_is_point)
        except (ValueError, TypeError, OSError, RuntimeError, MemoryError) as exc:
            raise _in_context(exc, target) from exc
    return bytes(header)


def _target(path: str | os.PathLike[str]) -> str:
    """Return the local path to write, refusing URLs (rumi writes local files)."""
    target = os.fspath(path)
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    if "://" in target:
        raise ValueError(f"{target}: Rumi writes local files; write locally, then upload")
    return target


def _pattern(target: str, frame: str, pattern: str | None) -> str:
    if pattern is not None:
        return pattern
    if frame not in PATTERNS:
        raise ValueError(f"{target}: frame must be one of {sorted(PATTERNS)}, got {frame!r}")
    return PATTERNS[frame]


def _check_tile_size(target: str, tile_size: int) -> None:
    if isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer)) or not (
            1 <= tile_size <= 65535):
        raise ValueError(f"{target}: tile_size must be an integer in [1, 65535], "
                         f"got {tile_size!r}")


def _check_dtype(target: str, dtype: np.dtype) -> np.dtype:
    """Return the native-order dtype to store, or raise if Rumi cannot store it."""
    native = dtype.newbyteorder("=") if not dtype.isnative else dtype
    if native not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"{target}: Rumi cannot store samples of dtype {dtype} "
                        f"(supported: {names}); cast the data first (e.g. .astype('float32'))")
    return native


def _in_context(exc: BaseException, target: str) -> BaseException:
    """Return ``exc`` with the destination named, same type when possible."""
    text = str(exc)
    if target in text:
        return exc
    try:
        new = type(exc)(f"{target}: {text}")
    except Exception:  # an exception type with a custom constructor
        new = RuntimeError(f"{target}: {text}")
    return new


@contextmanager
def _atomic(target: str) -> Iterator[str]:
    """Yield a temporary path beside ``target``; it replaces ``target`` on success.

    The temporary file is created up front, so an unwritable or missing
    directory fails before any compression work. It is removed whatever
    happens (exceptions, KeyboardInterrupt), so a failed write leaves the
    directory as it was, including an existing file at ``target``.
    """
    if os.path.isdir(target):
        raise IsADirectoryError(f"{target}: is a directory")
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{target}: directory {directory} does not exist")
    temporary = os.path.join(directory,
                             f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
    try:
        # os.open honours the umask (mkstemp would leave the file 0600).
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise type(exc)(exc.errno, f"{target}: cannot write in {directory}: "
                        f"{exc.strerror}") from exc
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        if os.path.lexists(temporary):
            os.remove(temporary)


def _compress_all(data: Any, specs: list[FrameSpec], compress: Compressor,
                  progress: bool) -> list[bytes]:
    if isinstance(data, np.ndarray):
        return [compress(frame_block(data[s.time, s.band, s.rows, s.cols], s.axes))
                for s in specs]
    import dask
    from dask.delayed import delayed

    # Rechunk to exactly one frame per block (a no-op when already aligned),
    # so every task reads one block and no block is held waiting for others.
    first = specs[0]
    tile = first.rows.stop - first.rows.start
    t_frame = first.time.stop - first.time.start
    b_frame = first.band.stop - first.band.start
    aligned = data.rechunk((t_frame, b_frame, tile, tile))
    blocks = aligned.to_delayed(optimize_graph=True)
    compress_frame = delayed(_compress_frame, pure=True)
    tasks = [compress_frame(blocks[s.time.start // t_frame, s.band.start // b_frame,
                                   s.rows.start // tile, s.cols.start // tile],
                            s.axes, compress)
             for s in specs]
    with _progress_bar(progress, len(tasks)):
        return list(dask.compute(*tasks))


@contextmanager
def _progress_bar(show: bool, frames: int) -> Iterator[None]:
    """Show dask task progress on standard error (tqdm when installed)."""
    if not show:
        yield
        return
    try:
        from tqdm.dask import TqdmCallback
    except ImportError:
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            yield
        return
    with TqdmCallback(desc=f"compressing {frames} frames", unit="task", file=sys.stderr):
        yield


def _compress_frame(block: np.ndarray, axes: tuple[str, ...], compress: Compressor) -> bytes:
    return compress(frame_block(np.asarray(block), axes))


# --- xarray objects -------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """An xarray object reduced to what Rumi stores.

    Attributes
    ----------
    data : xarray.DataArray
        Dimensions ``(time, band, y, x)``; its data is lazy (dask) when the
        input was.
    bands : list of str
    time : list
        ``numpy.datetime64[s]`` instants, or ``(start, end)`` pairs of them.
    transform : tuple of float or None
        Rumi transform (rasterio order; the first pixel's centre is the origin
        for PixelIsPoint).
    crs : int or None
        EPSG code.
    pixel_is_point : bool
    """

    data: xr.DataArray
    bands: list[str]
    time: list[Any]
    transform: tuple[float, ...] | None
    crs: int | None
    pixel_is_point: bool


def to_rumi(obj: xr.DataArray | xr.Dataset, path: str | os.PathLike[str], *,
            tile_size: int = 512, codec: str = DEFAULT_CODEC, frame: str = "plane",
            error: Any = None, band_dim: str = "band", time_dim: str = "time",
            variable: Hashable | None = None, time: Any = None,
            progress: bool | None = None) -> bytes:
    """Write an xarray object as a Rumi file.

    What is written, and where it comes from:

    - **data**: a DataArray; or from a Dataset, ``variable``, else
      ``band_data``, else its only raster variable (one with y and x
      dimensions), else all its raster variables as one band each, named by
      variable (the layout ``band_as_variable=True`` opens). Dimensions may
      come in any order and are transposed to ``(time, band, y, x)``;
      ``band`` and ``time`` may be missing (one band, one time step).
      y/x are the dimensions named ``y``/``lat``/``latitude`` and
      ``x``/``lon``/``longitude``, or the two remaining ones, in order.
    - **band names**: the ``band`` coordinate, as text; without one, the
      variable name for a single named band, else ``band_1``, ``band_2``...
    - **time**: the ``time`` coordinate (datetime64, dates, datetimes, or
      numbers with CF ``units``) as instants; with a bounds variable
      (``time.attrs["bounds"]``, e.g. ``time_bnds``, looked up in the Dataset)
      as ``(start, end)`` intervals. Without a time dimension: the scalar
      ``time`` coordinate. ``time=`` overrides both, and is required when
      there is neither: Rumi labels every time step. Times are UTC and whole
      seconds; they must be strictly increasing (intervals must not overlap).
    - **georeferencing**: regularly spaced 1-D ``x``/``y`` coordinates (pixel
      centres) give the transform; without them (rotated grids, a single
      row or column), the ``GeoTransform`` attribute (GDAL order, corner
      based) of the grid-mapping coordinate (``spatial_ref``). The EPSG code
      comes from that coordinate's ``crs_wkt``/``spatial_ref``/``epsg``
      attributes, else from rioxarray's ``obj.rio.crs`` when installed.
      ``AREA_OR_POINT == "Point"`` records PixelIsPoint: the stored origin is
      then the centre of pixel (0, 0). No coordinates and no CRS writes an
      image without georeferencing; a transform without a CRS (or the
      reverse) is an error.

    Values are written as they are in memory: big-endian samples are
    byte-swapped (losslessly), CF-decoded variables are stored decoded (Rumi
    has no scale, offset or nodata).

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
        Numpy-, dask- or lazily backed. Dask input stays lazy: it is
        compressed frame by frame in parallel dask tasks. Other input is
        chunked to frames first, so lazily opened files are read a frame at
        a time too.
    path : str or os.PathLike
        Local destination, replaced atomically; on any failure nothing is
        left behind (an existing file is kept as it was).
    tile_size : int, default 512
        Square tile size, 1 to 65535; edge tiles are clipped.
    codec : str, default ``"planar>zigzag>zstd"``
        geozl graph recipe for lossless frames.
    frame : {"plane", "plane-bt", "cell", "cell-hwb"}, default "plane"
        Frame layout: ``plane`` stores one band of one time step per frame
        (index walks time, then band), ``plane-bt`` the same walking band then
        time, ``cell`` every band and time step of a tile in one frame
        (band-planar), ``cell-hwb`` the same pixel-interleaved.
    error : int, float or str, optional
        Lossy compression: an absolute bound (number) or a relative one
        (``"1%"``), or a full geozl recipe. ``None`` (default) is lossless.
    band_dim, time_dim : str, default "band", "time"
        Names of the band and time dimensions of ``obj``.
    variable : hashable, optional
        The Dataset variable to write.
    time : optional
        Time labels replacing those of ``obj``: one instant or ``(start,
        end)`` pair per time step (a single one for data without a time
        dimension). Accepts datetime64, dates, datetimes and ISO text.
    progress : bool, optional
        Show a progress bar on standard error. ``None`` (default) shows one
        for writes of at least 256 MiB decoded when standard error is a
        terminal. Progress is reported for dask's local schedulers (a
        ``distributed`` client shows it on its dashboard instead).

    Returns
    -------
    bytes
        The file's external header.

    Raises
    ------
    ValueError
        Labels or georeferencing Rumi cannot store: duplicate or empty band
        names, missing/NaT/fractional-second/non-increasing times, a CRS
        without an EPSG code, a transform without a CRS, irregular
        coordinates, extra dimensions. Raised before any frame is compressed.
    TypeError
        A sample type Rumi cannot store (datetime64, object, strings...).
    OSError
        The destination cannot be written.
    """
    target = _target(path)
    pattern = _pattern(target, frame, None)
    _check_tile_size(target, tile_size)
    prepared = prepare(obj, target, band_dim=band_dim, time_dim=time_dim,
                       variable=variable, time=time, chunks=frame_chunks(pattern, tile_size))
    data = prepared.data.data
    if progress is None:
        progress = data.nbytes >= PROGRESS_BYTES and _is_terminal(sys.stderr)
    return write_array(target, data, bands=prepared.bands, time=prepared.time,
                       transform=prepared.transform, crs=prepared.crs,
                       pixel_is_point=prepared.pixel_is_point, tile_size=tile_size,
                       codec=codec, error=error, pattern=pattern, progress=bool(progress))


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def prepare(obj: xr.DataArray | xr.Dataset, where: str = "<to_rumi>", *,
            band_dim: str = "band", time_dim: str = "time", variable: Hashable | None = None,
            time: Any = None, chunks: dict[str, int] | None = None) -> Prepared:
    """Reduce an xarray object to the array and labels a Rumi file stores.

    Nothing is computed: the data stay as lazy as they were. See
    :func:`to_rumi` for the rules.

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
    where : str
        Named in error messages (the destination path).
    band_dim, time_dim : str
    variable : hashable, optional
    time : optional
        Time labels overriding those of ``obj``.
    chunks : dict, optional
        Chunks per standard dimension (``time``, ``band``, ``y``, ``x``,
        see :func:`frame_chunks`) for data that are not dask arrays yet; by
        default such data are left as they are.

    Returns
    -------
    Prepared
    """
    selected, ds = _select(obj, where, variable, band_dim, time_dim, chunks)
    da = _lazy(_standard_dims(selected, where, band_dim, time_dim), chunks, where)
    _check_dtype(where, np.dtype(da.dtype))
    _check_sizes(da, where)
    # Labels come from the selection as given: a scalar time coordinate and
    # its bounds are still scalar there.
    if time is not None:
        labels = _given_time(time, da.sizes["time"], where)
    elif time_dim in selected.dims:
        labels = _coordinate_time(selected, ds, time_dim, where)
    else:
        labels = _scalar_time(selected, ds, time_dim, where)
    bands = _band_names(da, where)
    transform, crs, pixel_is_point = _georeference(da, ds, where)
    return Prepared(data=da, bands=bands, time=labels, transform=transform, crs=crs,
                    pixel_is_point=pixel_is_point)


# --- which variable -------------------------------------------------------------


def _select(obj: xr.DataArray | xr.Dataset, where: str, variable: Hashable | None,
            band_dim: str, time_dim: str, chunks: dict[str, int] | None
            ) -> tuple[xr.DataArray, xr.Dataset | None]:
    """Return the DataArray to write and the Dataset it came from (if any)."""
    if isinstance(obj, xr.DataArray):
        return obj, None
    if not isinstance(obj, xr.Dataset):
        raise TypeError(f"{where}: to_rumi takes an xarray DataArray or Dataset, "
                        f"got {type(obj).__name__}")
    if variable is not None:
        if variable not in obj.data_vars:
            raise ValueError(f"{where}: no data variable {variable!r}; the Dataset has "
                             f"{sorted(map(str, obj.data_vars))}")
        return obj[variable], obj
    if "band_data" in obj.data_vars:
        return obj["band_data"], obj
    rasters = _raster_variables(obj, band_dim, time_dim)
    if not rasters:
        raise ValueError(f"{where}: the Dataset has no raster variable (one with y and x "
                         f"dimensions) among {sorted(map(str, obj.data_vars))}")
    if len(rasters) == 1:
        return obj[rasters[0]], obj
    return _stack_bands(obj, rasters, where, band_dim, time_dim, chunks), obj


def _auxiliary(ds: xr.Dataset) -> set[Hashable]:
    """Return names of variables that describe others (bounds, grid mappings)."""
    names: set[Hashable] = set()
    for var in ds.variables.values():
        for key in ("bounds", "grid_mapping"):
            for source in (var.attrs, var.encoding):
                value = source.get(key)
                if isinstance(value, str):
                    names.add(value)
    return names


def _raster_variables(ds: xr.Dataset, band_dim: str, time_dim: str) -> list[Hashable]:
    aux = _auxiliary(ds)
    out = []
    for name, var in ds.data_vars.items():
        if name in aux:
            continue
        spatial = [d for d in var.dims if d not in (band_dim, time_dim)]
        if len(spatial) == 2 and _yx_dims(spatial) is not None:
            out.append(name)
    return out


def _stack_bands(ds: xr.Dataset, names: list[Hashable], where: str, band_dim: str,
                 time_dim: str, chunks: dict[str, int] | None) -> xr.DataArray:
    """Stack single-band variables into one ``band`` dimension named by variable.

    Variables are chunked first (when ``chunks`` is given): concatenating
    lazily opened variables would otherwise load them all.
    """
    arrays = []
    for name in names:
        da = ds[name]
        if chunks is not None:
            spatial = _yx_dims([d for d in da.dims if d not in (band_dim, time_dim)])
            by_dim: dict[Hashable, int] = {time_dim: chunks["time"], band_dim: 1}
            if spatial is not None:
                by_dim.update({spatial[0]: chunks["y"], spatial[1]: chunks["x"]})
            da = _lazy(da, by_dim, where)
        if band_dim in da.dims:
            if da.sizes[band_dim] != 1:
                raise ValueError(
                    f"{where}: variable {name!r} has {da.sizes[band_dim]} bands; a Dataset of "
                    f"several variables is written one band per variable: pass variable= "
                    f"to write one of them")
            da = da.isel({band_dim: 0}, drop=True)
        arrays.append(da.drop_vars(band_dim, errors="ignore"))
    dtypes = {str(a.dtype) for a in arrays}
    if len(dtypes) > 1:
        listing = ", ".join(f"{n}: {a.dtype}" for n, a in zip(names, arrays, strict=True))
        raise ValueError(f"{where}: the variables written as bands must share one dtype, "
                         f"got {listing}; cast them first")
    dims = {tuple(a.dims) for a in arrays}
    if len(dims) > 1:
        raise ValueError(f"{where}: the variables written as bands must share dimensions, "
                         f"got {sorted(dims)}")
    labels = [str(n) for n in names]
    stacked = xr.concat(arrays, dim=band_dim, coords="minimal", compat="override",
                        join="override", combine_attrs="drop_conflicts")
    return stacked.assign_coords({band_dim: labels}).rename(None)


# --- dimensions -----------------------------------------------------------------


def _yx_dims(dims: Sequence[Hashable]) -> tuple[Hashable, Hashable] | None:
    """Return ``(y, x)`` among two spatial dimensions, by name or else by order."""
    if len(dims) != 2:
        return None
    y = [d for d in dims if str(d).lower() in _Y_NAMES]
    x = [d for d in dims if str(d).lower() in _X_NAMES]
    if len(y) == 1 and len(x) == 1:
        return y[0], x[0]
    return dims[0], dims[1]


def _standard_dims(da: xr.DataArray, where: str, band_dim: str,
                   time_dim: str) -> xr.DataArray:
    """Return ``da`` with dimensions ``(time, band, y, x)``, adding missing ones."""
    spatial = [d for d in da.dims if d not in (band_dim, time_dim)]
    yx = _yx_dims(spatial)
    if yx is None:
        extra = [d for d in spatial if str(d).lower() not in (*_Y_NAMES, *_X_NAMES)]
        raise ValueError(
            f"{where}: cannot write dimensions {tuple(map(str, da.dims))}: Rumi stores "
            f"(time, band, y, x); select or stack {[str(d) for d in extra] or 'the others'} "
            f"first (or name the band/time dimensions with band_dim=/time_dim=)")
    y_dim, x_dim = yx
    da = _rename(da, {band_dim: "band", time_dim: "time", y_dim: "y", x_dim: "x"})
    # expand_dims promotes a scalar band/time coordinate to the new dimension's.
    if "band" not in da.dims:
        da = da.expand_dims("band")
    if "time" not in da.dims:
        da = da.expand_dims("time")
    return da.transpose("time", "band", "y", "x")


def _rename(da: xr.DataArray, names: dict[Hashable, str]) -> xr.DataArray:
    """Rename dimensions (and their coordinates) when they differ from the standard."""
    mapping = {old: new for old, new in names.items() if old != new and old in da.dims}
    if not mapping:
        return da
    clashes = [new for new in mapping.values() if new in da.coords and new not in mapping]
    if clashes:
        da = da.drop_vars(clashes)
    return da.rename(mapping)


def _check_sizes(da: xr.DataArray, where: str) -> None:
    empty = [str(d) for d in da.dims if da.sizes[d] == 0]
    if empty:
        raise ValueError(f"{where}: cannot write an empty array (size 0 along {empty})")
    if da.sizes["band"] > 65535:
        raise ValueError(f"{where}: Rumi stores at most 65535 bands, got {da.sizes['band']}")
    for dim in ("time", "y", "x"):
        if da.sizes[dim] > 0xFFFFFFFF:
            raise ValueError(f"{where}: {dim} size {da.sizes[dim]} exceeds Rumi's limit "
                             f"of 4294967295")


def frame_chunks(pattern: str, tile_size: int) -> dict[str, int]:
    """Return dask chunks holding exactly one frame, per standard dimension.

    Parameters
    ----------
    pattern : str
        A rumi frame pattern over ``t b (row h) (col w)``.
    tile_size : int

    Returns
    -------
    dict
        ``time``/``band``: 1 when frames walk that axis, -1 (all) when a frame
        holds every step; ``y``/``x``: the tile size.
    """
    # Every axis longer than 1, so the layout shows which ones frames hold.
    probe = np.broadcast_to(np.zeros((), dtype=np.uint8), (2, 2, 1, 1))
    axes = rumi.frames(probe, pattern, tile_size=tile_size).layout.split()
    return {"time": -1 if "t" in axes else 1, "band": -1 if "b" in axes else 1,
            "y": tile_size, "x": tile_size}


def _lazy(da: xr.DataArray, chunks: Mapping[Hashable, int] | None, where: str
          ) -> xr.DataArray:
    """Return ``da`` with dask data, chunked to frames unless it is dask already.

    Dask data pass through untouched (:func:`write_array` aligns them to
    frames). Anything else is wrapped without copying or loading: numpy data
    then compress in parallel, and lazily opened files are read one frame's
    window at a time.
    """
    if chunks is None or da.chunks is not None:
        return da
    try:
        return da.chunk({d: c for d, c in chunks.items() if d in da.dims})
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise ValueError(f"{where}: cannot chunk the input for writing: {exc}") from exc


# --- band names -----------------------------------------------------------------


def _band_names(da: xr.DataArray, where: str) -> list[str]:
    """Return one text per band, checked against Rumi's rules."""
    n = da.sizes["band"]
    if "band" in da.coords and da["band"].ndim == 1:
        names = [_text(v) for v in da["band"].values.tolist()]
    elif "band" in da.coords and da["band"].ndim == 0:
        names = [_text(da["band"].values.item())]
    elif n == 1 and isinstance(da.name, str) and da.name and da.name != "band_data":
        names = [da.name]
    else:
        names = [f"band_{i + 1}" for i in range(n)]
    _check_band_names(names, where)
    return names


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _check_band_names(names: Sequence[str], where: str) -> None:
    for i, name in enumerate(names):
        if not name:
            raise ValueError(f"{where}: band {i} has an empty name; Rumi names every band")
        if "\x00" in name:
            raise ValueError(f"{where}: band {i} name {name!r} contains a NUL character")
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise ValueError(
                f"{where}: bands {seen[name]} and {i} are both named {name!r}; Rumi band "
                f"names are unique (assign_coords(band=[...]) to rename)")
        seen[name] = i


# --- time -----------------------------------------------------------------------


def _coordinate_time(da: xr.DataArray, ds: xr.Dataset | None, time_dim: str,
                     where: str) -> list[Any]:
    """Return the time labels of a time dimension, from its coordinate and bounds."""
    if time_dim not in da.coords:
        raise ValueError(
            f"{where}: the {time_dim!r} dimension has no coordinate; Rumi labels every time "
            f"step: assign one (assign_coords({time_dim}=...)) or pass time=[...]")
    coord = da[time_dim]
    starts = _seconds(_decoded(coord.variable), f"the {time_dim!r} coordinate", where)
    bounds = _bounds(coord, da, ds)
    if bounds is None:
        _check_increasing(starts, where, time_dim)
        return [_instant(s) for s in starts]
    pairs = _seconds(_decoded(bounds, coord.variable), "the time bounds", where)
    if pairs.shape != (starts.size, 2):
        raise ValueError(f"{where}: the time bounds have shape {pairs.shape}, expected "
                         f"({starts.size}, 2)")
    _check_intervals(pairs, where)
    return [(_instant(a), _instant(b)) for a, b in pairs]


def _scalar_time(da: xr.DataArray, ds: xr.Dataset | None, time_dim: str,
                 where: str) -> list[Any]:
    """Return the single time label of data without a time dimension."""
    coord = da.coords.get(time_dim)
    if coord is None or coord.ndim != 0:
        raise ValueError(
            f"{where}: the data have no time coordinate; Rumi labels every time step: pass "
            f"time=... (a date or datetime, or a (start, end) pair), or assign a scalar "
            f"{time_dim!r} coordinate")
    start = _seconds(_decoded(coord.variable), "the time coordinate", where)
    bounds = _bounds(coord, da, ds)
    if bounds is None:
        return [_instant(start.reshape(-1)[0])]
    pair = _seconds(_decoded(bounds, coord.variable), "the time bounds", where).reshape(-1, 2)
    _check_intervals(pair, where)
    return [(_instant(pair[0, 0]), _instant(pair[0, 1]))]


def _bounds(coord: xr.DataArray, da: xr.DataArray, ds: xr.Dataset | None
            ) -> xr.Variable | None:
    """Return the bounds variable a time coordinate names, if it can be found."""
    name = coord.attrs.get("bounds", coord.encoding.get("bounds"))
    if not isinstance(name, str):
        return None
    if name in da.coords:
        return da[name].variable
    if ds is not None and name in ds.variables:
        return ds[name].variable
    return None


def _decoded(var: xr.Variable, units_from: xr.Variable | None = None) -> np.ndarray:
    """Return time values, decoding numbers that carry CF ``units``."""
    values = np.asarray(var.values)
    if values.dtype.kind not in "iuf":
        return values
    attrs = dict(var.attrs)
    if "units" not in attrs and units_from is not None:
        for key in ("units", "calendar"):
            if key in units_from.attrs:
                attrs[key] = units_from.attrs[key]
    if "units" not in attrs:
        return values
    decoded = xr.decode_cf(xr.Dataset({"t": xr.Variable(var.dims, values, attrs)}))
    return np.asarray(decoded["t"].values)


def _given_time(time: Any, steps: int, where: str) -> list[Any]:
    """Return the labels passed as ``time=``: one per step (or one, unwrapped)."""
    if isinstance(time, tuple) or np.ndim(time) == 0:
        time = [time]
    entries = list(time)
    if len(entries) != steps:
        raise ValueError(f"{where}: time= has {len(entries)} entries for {steps} time "
                         f"step(s)")
    if all(isinstance(e, tuple) for e in entries):
        pairs = _seconds(np.array([[a, b] for a, b in entries], dtype=object),
                         "time=", where)
        _check_intervals(pairs, where)
        return [(_instant(a), _instant(b)) for a, b in pairs]
    if any(isinstance(e, tuple) for e in entries):
        raise ValueError(f"{where}: time= mixes instants and (start, end) intervals; a file "
                         f"records one kind")
    seconds = _seconds(np.array(entries, dtype=object), "time=", where)
    _check_increasing(seconds, where, "time")
    return [_instant(s) for s in seconds]


def _seconds(values: Any, what: str, where: str) -> np.ndarray:
    """Return POSIX seconds of datetime-like values, refusing NaT and fractions."""
    import pandas as pd

    arr = np.asarray(values)
    if arr.dtype.kind != "M":
        if arr.dtype.kind in "iufb":
            raise ValueError(f"{where}: {what} holds numbers without CF time units; "
                             f"give dates (datetime64, datetime or ISO text)")
        try:
            index = pd.to_datetime(arr.ravel(), utc=True)
        except (TypeError, ValueError, OverflowError) as exc:
            kinds = sorted({type(v).__name__ for v in arr.ravel().tolist()})
            raise ValueError(
                f"{where}: {what} cannot be read as UTC dates ({', '.join(kinds)}): {exc}; "
                f"Rumi records proleptic Gregorian UTC times (convert cftime calendars with "
                f".convert_calendar('standard', use_cftime=False))") from exc
        arr = index.tz_convert(None).to_numpy().reshape(arr.shape)
    if np.isnat(arr).any():
        position = np.argwhere(np.isnat(arr))[0].tolist()
        raise ValueError(f"{where}: {what} has a missing time (NaT) at {position}; Rumi "
                         f"labels every time step")
    whole = arr.astype("datetime64[s]")
    fractional = whole.astype(arr.dtype) != arr
    if fractional.any():
        first = arr[tuple(np.argwhere(fractional)[0])]
        raise ValueError(f"{where}: {what} has {first}, a fraction of a second; Rumi records "
                         f"whole seconds: round first (e.g. .dt.floor('s'))")
    return whole.astype(np.int64)


def _instant(seconds: Any) -> np.datetime64:
    return np.datetime64(int(seconds), "s")


def _check_increasing(seconds: np.ndarray, where: str, what: str) -> None:
    steps = np.diff(seconds.reshape(-1))
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        word = "repeats" if steps[bad[0]] == 0 else "goes backwards"
        raise ValueError(
            f"{where}: {what} {word} at step {i} ({_instant(seconds[i - 1])} then "
            f"{_instant(seconds[i])}); Rumi stores strictly increasing time steps: "
            f"sortby({what!r}) and drop duplicates first")


def _check_intervals(pairs: np.ndarray, where: str) -> None:
    for i, (start, end) in enumerate(pairs.tolist()):
        if start >= end:
            raise ValueError(f"{where}: time interval {i} ({_instant(start)}, {_instant(end)}) "
                             f"does not end after it starts")
    for i in range(1, len(pairs)):
        if pairs[i, 0] < pairs[i - 1, 1]:
            raise ValueError(
                f"{where}: time interval {i} starts at {_instant(pairs[i, 0])}, before interval "
                f"{i - 1} ends ({_instant(pairs[i - 1, 1])}); Rumi intervals are increasing "
                f"and may meet but not overlap")


# --- georeferencing -------------------------------------------------------------


def _georeference(da: xr.DataArray, ds: xr.Dataset | None, where: str
                  ) -> tuple[tuple[float, ...] | None, int | None, bool]:
    """Return the Rumi transform, EPSG code and PixelIsPoint flag of ``da``."""
    mapping = _grid_mapping(da, ds)
    attrs = mapping.attrs if mapping is not None else {}
    point = _area_or_point(da, ds) == "point"
    corner, source = _corner_transform(da, attrs, where)
    epsg = _epsg(da, attrs, where)
    if corner is None and epsg is None:
        return None, None, False
    if epsg is None:
        raise ValueError(
            f"{where}: the data have a transform (from {source}) but no CRS; Rumi stores "
            f"georeferencing only with an EPSG CRS: set one (e.g. .rio.write_crs('EPSG:4326'), "
            f"or an 'epsg' attribute on the spatial_ref coordinate), or drop the x/y "
            f"coordinates to write without georeferencing")
    if corner is None:
        raise ValueError(
            f"{where}: the data have a CRS (EPSG:{epsg}) but no transform: give regularly "
            f"spaced 1-D x/y coordinates or a GeoTransform attribute on the grid mapping")
    _check_transform(corner, where)
    if point:
        a, b, c, d, e, f = corner
        corner = (a, b, c + 0.5 * (a + b), d, e, f + 0.5 * (d + e))
    return corner, epsg, point


def _grid_mapping(da: xr.DataArray, ds: xr.Dataset | None) -> xr.DataArray | None:
    name = da.encoding.get("grid_mapping", da.attrs.get("grid_mapping", "spatial_ref"))
    if name in da.coords:
        return da.coords[name]
    if ds is not None and name in ds.variables:
        return ds[name]
    return None


def _area_or_point(da: xr.DataArray, ds: xr.Dataset | None) -> str:
    for attrs in (da.attrs, ds.attrs if ds is not None else {}):
        value = attrs.get("AREA_OR_POINT")
        if isinstance(value, str):
            return value.strip().lower()
    return "area"


def _corner_transform(da: xr.DataArray, attrs: dict[Hashable, Any], where: str
                      ) -> tuple[tuple[float, ...] | None, str]:
    """Return the corner transform (rasterio order) and where it came from.

    1-D coordinates win over ``GeoTransform``: they follow any slicing done
    after opening, whereas the attribute keeps describing the original grid.
    """
    geo = _geotransform(attrs, where)
    xs = _axis(da, "x")
    ys = _axis(da, "y")
    if xs is not None and ys is not None and (xs.size > 1 or ys.size > 1 or geo is not None):
        if geo is not None and (geo[1] != 0.0 or geo[3] != 0.0):
            raise ValueError(f"{where}: the GeoTransform is rotated but x/y are 1-D "
                             f"coordinates; drop one or the other")
        a = _spacing(xs, "x", where, None if geo is None else geo[0])
        e = _spacing(ys, "y", where, None if geo is None else geo[4])
        return (a, 0.0, float(xs[0]) - 0.5 * a, 0.0, e, float(ys[0]) - 0.5 * e), \
            "the x/y coordinates"
    if geo is not None:
        _check_2d_coords(da, geo, where)
        return geo, "the GeoTransform attribute"
    if xs is not None or ys is not None:
        raise ValueError(f"{where}: cannot derive a transform from one pixel along x or y "
                         f"without a GeoTransform attribute")
    return None, ""


def _axis(da: xr.DataArray, dim: str) -> np.ndarray | None:
    if dim in da.coords and da[dim].dims == (dim,):
        values = np.asarray(da[dim].values)
        if values.dtype.kind in "iuf":
            return values
    return None


def _spacing(values: np.ndarray, dim: str, where: str, fallback: float | None) -> float:
    """Return the step of regularly spaced pixel centres, or raise."""
    if values.size == 1:
        if fallback is None:
            raise ValueError(f"{where}: cannot derive the pixel size from one {dim} "
                             f"coordinate without a GeoTransform attribute")
        return float(fallback)
    v = values.astype(np.float64)
    step = (v[-1] - v[0]) / (v.size - 1)
    if step == 0 or not math.isfinite(step):
        raise ValueError(f"{where}: the {dim} coordinate is constant or not finite")
    # Tolerate rounding of stored coordinates (float32 UTM northings are off by
    # up to half a metre) but not a real irregularity: 1 % of a pixel plus a
    # few units in the last place of the values' own precision.
    eps = np.finfo(values.dtype).eps if values.dtype.kind == "f" else 0.0
    tolerance = 0.01 * abs(step) + 4 * eps * float(np.max(np.abs(v)))
    deviation = np.abs(v - (v[0] + step * np.arange(v.size)))
    if float(np.max(deviation)) > tolerance:
        i = int(np.argmax(deviation))
        raise ValueError(
            f"{where}: the {dim} coordinate is not regularly spaced (value {i} is {v[i]!r}, "
            f"{deviation[i]:.6g} away from a grid of step {step!r}); Rumi stores an affine "
            f"grid: interpolate onto a regular grid first")
    return float(step)


def _geotransform(attrs: dict[Hashable, Any], where: str) -> tuple[float, ...] | None:
    """Return GDAL's ``GeoTransform`` text (``c a b f d e``) as a rasterio-order tuple."""
    text = attrs.get("GeoTransform")
    if text is None:
        return None
    try:
        values = [float(v) for v in (text.split() if isinstance(text, str) else text)]
    except (TypeError, ValueError):
        values = []
    if len(values) != 6:
        raise ValueError(f"{where}: GeoTransform {text!r} is not six numbers")
    c, a, b, f, d, e = values
    return (a, b, c, d, e, f)


def _check_2d_coords(da: xr.DataArray, corner: tuple[float, ...], where: str) -> None:
    """Check a GeoTransform against 2-D ``xc``/``yc`` coordinates, when present.

    A rotated grid sliced after opening keeps its original GeoTransform;
    comparing three corners catches that instead of writing a wrong grid.
    """
    if "xc" not in da.coords or "yc" not in da.coords:
        return
    if set(da["xc"].dims) != {"y", "x"}:
        return
    height, width = da.sizes["y"], da.sizes["x"]
    a, b, c, d, e, f = corner
    for row, col in ((0, 0), (0, width - 1), (height - 1, 0)):
        expected_x = a * (col + 0.5) + b * (row + 0.5) + c
        expected_y = d * (col + 0.5) + e * (row + 0.5) + f
        got_x = float(da["xc"].isel(y=row, x=col).values)
        got_y = float(da["yc"].isel(y=row, x=col).values)
        scale = max(abs(a), abs(b), abs(d), abs(e))
        if abs(got_x - expected_x) > 0.01 * scale or abs(got_y - expected_y) > 0.01 * scale:
            raise ValueError(
                f"{where}: the GeoTransform does not match the xc/yc coordinates at pixel "
                f"({row}, {col}) (was the array sliced after opening?); update the "
                f"GeoTransform attribute of the grid mapping")


def _check_transform(corner: tuple[float, ...], where: str) -> None:
    a, b, _, d, e, _ = corner
    if not all(math.isfinite(v) for v in corner):
        raise ValueError(f"{where}: the transform {corner} is not finite")
    if a * e - b * d == 0:
        raise ValueError(f"{where}: the transform {corner} is singular (zero pixel size)")


def _epsg(da: xr.DataArray, attrs: dict[Hashable, Any], where: str) -> int | None:
    """Return the EPSG code of the data's CRS, None without one; raise if not EPSG."""
    for key in ("crs_wkt", "spatial_ref"):
        text = attrs.get(key)
        if isinstance(text, str) and text.strip():
            return _epsg_of(text, where, fallback=attrs.get("epsg"))
    code = attrs.get("epsg")
    if code is not None:
        return _epsg_of(code, where)
    crs = _rio_crs(da)
    return None if crs is None else _epsg_of(crs, where)


def _epsg_of(crs: Any, where: str, fallback: Any = None) -> int:
    try:
        from pyproj import CRS
        from pyproj.exceptions import CRSError
    except ImportError:
        if isinstance(crs, (int, np.integer)) or (isinstance(crs, str) and crs.isdigit()):
            return int(crs)
        if fallback is not None:
            return int(fallback)
        raise ValueError(f"{where}: reading the CRS needs pyproj (pip install "
                         f"'rumi-xarray[geo]')") from None
    try:
        parsed = CRS.from_user_input(int(crs) if isinstance(crs, np.integer) else crs)
    except CRSError as exc:
        raise ValueError(f"{where}: cannot parse the CRS: {exc}") from exc
    code = parsed.to_epsg()
    if code is None and fallback is not None:
        code = int(fallback)
    if code is None:
        raise ValueError(
            f"{where}: the CRS {parsed.name!r} has no EPSG code; Rumi stores EPSG CRSs only: "
            f"reproject first (e.g. .rio.reproject('EPSG:4326'))")
    return int(code)


def _rio_crs(da: xr.DataArray) -> Any:
    """Return rioxarray's view of the CRS, when rioxarray is installed."""
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return None
    try:
        return da.rio.crs
    except Exception:  # rioxarray raises various errors on non-geospatial arrays
        return None

