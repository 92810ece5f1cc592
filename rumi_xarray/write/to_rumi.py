"""Write Rumi files: :func:`write_array` for arrays, :func:`to_rumi` for xarray objects.

:func:`write_array` takes a ``(time, band, y, x)`` numpy or dask array plus
labels. Dask input is rechunked to whole frames and compressed frame by frame
in parallel dask tasks, so the whole array is never held in memory, only its
compressed frames (which ``rumi.write`` needs all at once to lay out the
file). :func:`to_rumi` derives those labels from an xarray object
(:mod:`rumi_xarray.write.prepare`) and hands a lazily chunked array to
:func:`write_array`.

Every write goes to a hidden temporary file in the destination directory that
replaces the destination only once complete, so no failure (bad input,
compression error, interrupt) ever leaves a partial or clobbered file behind.
Nodata, scale, offset and units, which the format has no field for, go to the
sidecar ``<file>.aux.json`` (:mod:`rumi_xarray.conventions.sidecar`), staged
beside the file and renamed right after it; a stale sidecar is removed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray import progress as progress_bars
from rumi_xarray.conventions import cf
from rumi_xarray.conventions.attributes import Attributes, json_value
from rumi_xarray.conventions.digests import labels_digest
from rumi_xarray.conventions.facts import Facts
from rumi_xarray.conventions.sidecar import Overviews, Sidecar, SidecarUpdate, sidecar_path
from rumi_xarray.errors import (
    RumiError,
    RumiUnsupportedError,
    RumiWriteError,
    RumiWriteTypeError,
    RumiWriteValueError,
    input_error,
    with_context,
)
from rumi_xarray.model import overviews as levels_model
from rumi_xarray.native import reads
from rumi_xarray.native.files import write_file
from rumi_xarray.native.frames import (
    DEFAULT_CODEC,
    PATTERNS,
    Compressor,
    FrameSpec,
    check_dtype,
    frame_axes,
    frame_block,
    frame_specs,
)
from rumi_xarray.sources.location import locate
from rumi_xarray.write import overviews as level_files
from rumi_xarray.write.atomic import atomic_path
from rumi_xarray.write.prepare import prepare

#: The name a Rumi file ends with: tools that go by the suffix (GDAL for ``.tif``) fail
#: on a Rumi file named otherwise.
SUFFIX = ".rumi"


def write_array(path: str | os.PathLike[str], data: Any, *, bands: Sequence[str],
                time: Sequence[Any], transform: Sequence[float] | None = None,
                crs: Any = None, pixel_is_point: bool = False, tile_size: int = 512,
                codec: str = DEFAULT_CODEC, error: Any = None, frame: str = "plane",
                pattern: str | None = None, progress: bool | None = None,
                nodata: Any = None, scale_factor: float | None = None,
                add_offset: float | None = None, units: str | None = None,
                decoded_dtype: Any = None, crs_wkt: str | None = None,
                geotransform: str | None = None, any_suffix: bool = False,
                attributes: Attributes | Mapping[str, Any] | None = None,
                overviews: Any = None, overview_resampling: str = "average") -> bytes:
    """Write a ``(time, band, y, x)`` array as a Rumi file.

    Nodata, scale, offset and units go to the sidecar ``<path>.aux.json``
    (written atomically right after the file; without any of them a stale
    sidecar is removed), where ``xr.open_dataset(path, engine="rumi")`` finds
    them and decodes as CF says (``mask_and_scale=True``).

    Parameters
    ----------
    path : str or os.PathLike
        Local output path ending in ``.rumi``, replaced atomically. Nothing
        is left behind on failure.
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
    progress : bool, optional
        Show a progress bar; ``None`` follows ``rx.set_options(progress=...)``
        (by default, in terminals and notebooks).
    nodata : number, optional
        The sample value that marks missing data (CF ``_FillValue``); it must
        be a value of the array's dtype (NaN for floats).
    scale_factor, add_offset : float, optional
        Physical value = sample * scale_factor + add_offset (CF packing).
    units : str, optional
        Units of the physical values.
    decoded_dtype : {"float32", "float64"}, optional
        The type packed samples decode to; by default float32 for samples of
        16 bits or less and float64 otherwise (as GDAL and rioxarray decode).
    crs_wkt : str, optional
        The full CRS (WKT2) when it is not exactly the EPSG code ``crs``
        (e.g. ESRI:102039 stored as its equivalent EPSG:5070), or when it
        has no EPSG equivalent; kept in the sidecar, which reopening prefers.
    geotransform : str, optional
        GDAL's ``GeoTransform`` text for the sidecar, for a grid whose CRS
        has no EPSG code (the file then stores no transform).
    any_suffix : bool, default False
        Write ``path`` even when its name does not end in ``.rumi`` (see
        ``check_suffix``).
    attributes : mapping, optional
        Attributes to keep in the sidecar, shown when the file is opened:
        ``{"dataset": {...}, "variable": {...}, "bands": [{...}, ...]}``
        (the Dataset's ``attrs``, ``band_data``'s, and each band's), with
        texts, numbers, booleans or flat lists of them as values (see
        ``rumi_xarray.conventions.attributes``).
    overviews : None, "auto" or list of int, optional
        Overview levels, as GDAL's COG driver makes them: ``"auto"`` halves
        the image until it fits within one tile (``OVERVIEWS=AUTO``), a list
        of factors such as ``[2, 4, 8]`` makes a level of ``ceil(size /
        factor)`` pixels per factor (``gdaladdo``). Each level is the Rumi
        file ``<path>.ovr<factor>`` beside ``path``, recorded in its sidecar;
        ``xr.open_dataset(path, engine="rumi", overview_level=k)`` opens it.
        Levels of an earlier write that are not made again are removed.
    overview_resampling : {"average", "nearest"}, default "average"
        How levels are computed, each from the previous one, exactly as GDAL
        computes ``AVERAGE`` (nodata left out) and ``NEAREST``.

    Returns
    -------
    bytes
        The external header.

    Raises
    ------
    RumiWriteValueError
        An option, label or value that cannot be stored (also a
        ``ValueError``), raised before anything is written; an
        ``overview_resampling`` other than average and nearest.
    TypeError
        A sample type Rumi cannot store.
    RumiWriteError
        The destination cannot be written.

    Examples
    --------
    >>> data = np.arange(2 * 3 * 32 * 32, dtype="uint16").reshape(2, 3, 32, 32)
    >>> header = rx.write_array("small.rumi", data, bands=["B04", "B08", "B11"],
    ...                         time=["2024-05-01", "2024-05-11"], tile_size=16,
    ...                         transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5900040.0),
    ...                         crs=32633)
    >>> small = xr.open_dataset("small.rumi", engine="rumi", mask_and_scale=False)
    >>> bool((small.band_data.values == data).all())
    True
    """
    target = os.fsdecode(path)
    with as_write_value_errors(target):
        target = _target(path)
        check_suffix(target, any_suffix, writer="write_array")
        if data.ndim != 4:
            raise ValueError(f"{target}: write_array takes (time, band, y, x), "
                             f"got {data.ndim} axes")
        pattern = _pattern(target, frame, pattern)
        _check_tile_size(target, tile_size)
        dtype = check_dtype(target, np.dtype(data.dtype))
        compress = Compressor(codec, error)
        compress.check(dtype, target)
        facts = Facts(nodata=nodata, scale=scale_factor, offset=add_offset, units=units,
                      decoded_dtype=None if decoded_dtype is None
                      else str(np.dtype(decoded_dtype)))
        try:
            cf.cf_attributes(facts, dtype, target)  # nodata fits the samples, known types
        except RumiError as exc:
            raise ValueError(str(exc)) from None
        described = _attributes(attributes, int(data.shape[1]))
        t, b, h, w = (int(n) for n in data.shape)
        levels = levels_model.plan_levels(h, w, overviews, tile_size)
        resampling = levels_model.check_resampling(overview_resampling)
        if levels:
            levels_model.check_dtype(dtype, resampling)
    sidecar = SidecarUpdate(target, Sidecar(facts, crs_wkt, geotransform,
                                            attributes=described))
    recorded = Overviews(resampling)
    with atomic_path(target) as temporary:
        try:
            table, specs = frame_specs((t, b, h, w), dtype, pattern, tile_size)
            payloads = _compress_all(data, specs, compress, progress, target)
            header = write_file(temporary, table, payloads, bands=bands, time=time,
                                transform=transform, crs=crs, pixel_is_point=pixel_is_point)
            if levels:
                # From the stored samples: the array when it holds them (in memory,
                # lossless), else each plane read back from the file just written.
                exact = isinstance(data, np.ndarray) and error is None
                samples = level_files.compute_levels(
                    data, dtype, None if exact else temporary, header, levels, resampling,
                    facts.nodata, progress)

                def write_level(level_path: str, array: np.ndarray,
                                level_transform: tuple[float, ...] | None,
                                level_geotransform: str | None) -> tuple[str, bytes]:
                    level_header = write_array(
                        level_path, array, bands=bands, time=time,
                        transform=level_transform, crs=crs, pixel_is_point=pixel_is_point,
                        tile_size=tile_size, codec=codec, error=error, pattern=pattern,
                        progress=False, nodata=nodata, scale_factor=scale_factor,
                        add_offset=add_offset, units=units, decoded_dtype=decoded_dtype,
                        crs_wkt=crs_wkt, geotransform=level_geotransform, any_suffix=True,
                        attributes=described)
                    return (labels_digest(reads.info(level_path), level_path),
                            bytes(level_header))

                recorded = level_files.write_levels(
                    target, samples, levels, resampling, base_shape=(h, w),
                    transform=transform, pixel_is_point=pixel_is_point,
                    geotransform=geotransform, write=write_level)
            # The labels as a reader will decode them from the written trailer: librumi's
            # frame checksums do not cover them, the sidecar's digest does.
            sidecar.stage(labels_digest(reads.info(temporary), target), recorded)
        except RumiError:
            sidecar.discard()
            raise
        except (ValueError, TypeError, OSError, RuntimeError, MemoryError) as exc:
            sidecar.discard()
            if isinstance(exc, TypeError):
                raise input_error(RumiWriteTypeError, f"{target}: {exc}", target) from exc
            raise with_context(exc, target, source=target,
                               kind=RumiWriteError if isinstance(exc, OSError) else None
                               ) from exc
        except BaseException:
            sidecar.discard()
            raise
    try:
        sidecar.commit()
    except OSError as exc:
        raise with_context(exc, f"{sidecar_path(target)}: cannot write the sidecar",
                           source=target, kind=RumiWriteError) from exc
    # Levels an earlier write made and this one did not: no sidecar records them now.
    level_files.remove_stale(target, [level.file for level in recorded.levels])
    return header


def _attributes(given: Attributes | Mapping[str, Any] | None, bands: int) -> Attributes:
    """Return ``write_array``'s ``attributes=`` checked (one mapping per band, if any)."""
    if given is None:
        return Attributes()
    if isinstance(given, Attributes):
        described = given
    else:
        # numpy numbers and arrays, tuples: as JSON holds them; anything else is refused
        described = Attributes.from_json({part: _plain(value) for part, value in given.items()})
    if described.bands and len(described.bands) != bands:
        raise ValueError(f"attributes has {len(described.bands)} band mapping(s) for "
                         f"{bands} band(s)")
    return described


def _plain(value: Any) -> Any:
    """Return ``attributes=`` values as JSON holds them, where that changes nothing."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and all(isinstance(v, Mapping) for v in value):
        return [_plain(v) for v in value]
    converted, reason = json_value(value)
    return value if reason is not None else converted


@contextlib.contextmanager
def as_write_value_errors(target: str) -> Iterator[None]:
    """Raise a ``ValueError`` about what a write was given as :class:`RumiWriteValueError`.

    The checks of options, labels and values raise plain ``ValueError``;
    at the public entry points they become a :class:`RumiError` naming the
    destination (still a ``ValueError``, as they always were).

    Parameters
    ----------
    target : str
        The destination, named in the message when it is not already.
    """
    try:
        yield
    except RumiError:
        raise
    except ValueError as exc:
        text = str(exc)
        if not text.startswith(target):
            text = f"{target}: {text}"
        raise input_error(RumiWriteValueError, text, target) from exc


def _target(path: str | os.PathLike[str]) -> str:
    """Return the local path to write, refusing URLs (rumi writes local files)."""
    target = os.fspath(path)
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    if not _local(target):
        raise ValueError(f"{target}: Rumi writes local files; write locally, then upload")
    return target


def check_suffix(target: str, any_suffix: bool = False, *, writer: str = "to_rumi",
                 override: str = "any_suffix=True") -> None:
    """Refuse a destination whose name does not end in ``.rumi`` (any case).

    A Rumi file named ``out.tif`` is taken for a GeoTIFF by every tool that
    goes by the suffix (GDAL, QGIS, file browsers), which then fail on it.
    ``to_rumi``, ``write_array`` and ``rumi-xarray convert`` share this rule.

    Parameters
    ----------
    target : str
        The destination.
    any_suffix : bool, default False
        Accept any name.
    writer : str
        What writes, named in the message.
    override : str
        How the caller asks for any name, named in the message.

    Raises
    ------
    RumiWriteValueError
        The name does not end in ``.rumi`` and ``any_suffix`` is False.

    Examples
    --------
    >>> check_suffix("scene.rumi")
    >>> check_suffix("scene.tif", any_suffix=True)
    """
    if any_suffix or target.lower().endswith(SUFFIX) or os.path.isdir(target):
        return  # a directory is refused as one, a clearer message (write/atomic.py)
    suffix = os.path.splitext(target)[1] or "no suffix"
    raise input_error(
        RumiWriteValueError,
        f"{target}: {writer} writes a Rumi file, but the destination's name has {suffix}, not "
        f"{SUFFIX} (tools that go by the suffix, such as GDAL for .tif, would fail on it); "
        f"name it {SUFFIX}, or pass {override} to write it anyway", target)


def _local(target: str) -> bool:
    try:
        return locate(target).local
    except RumiUnsupportedError:  # /vsimem/, /vsizip/...: not a local file either
        return False


def _pattern(target: str, frame: str, pattern: str | None) -> str:
    if pattern is not None:
        return pattern
    if frame not in PATTERNS:
        raise ValueError(f"{target}: frame must be one of {sorted(PATTERNS)}, got {frame!r}")
    return PATTERNS[frame]


def _check_tile_size(target: str, tile_size: int) -> None:
    # Callers may pass anything at run time, whatever the annotation says.
    size: Any = tile_size
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not (
            1 <= size <= 65535):
        raise ValueError(f"{target}: tile_size must be an integer in [1, 65535], "
                         f"got {tile_size!r}")



def _compress_all(data: Any, specs: list[FrameSpec], compress: Compressor,
                  show: bool | None, target: str = "") -> list[bytes]:
    with progress_bars.bar(len(specs), "compressing", unit="frame", show=show) as advance:
        if isinstance(data, np.ndarray):
            out = []
            for s in specs:
                out.append(compress(frame_block(data[s.time, s.band, s.rows, s.cols], s.axes)))
                advance(1)
            return out
        from rumi_xarray.write.batches import compress_frames

        first = specs[0]
        frame_shape = (first.time.stop - first.time.start, first.band.stop - first.band.start,
                       first.rows.stop - first.rows.start, first.cols.stop - first.cols.start)
        starts = [(s.time.start, s.band.start, s.rows.start, s.cols.start) for s in specs]
        return compress_frames(data, starts, frame_shape, _FrameCompressor(compress, specs),
                               advance, target)


class _FrameCompressor:
    """Compress one frame block given as ``(t, b, h, w)``: picklable, for dask tasks."""

    def __init__(self, compress: Compressor, specs: list[FrameSpec]) -> None:
        self.compress = compress
        self.axes = specs[0].axes

    def __call__(self, block: np.ndarray) -> bytes:
        return self.compress(frame_block(block, self.axes))


# --- xarray objects -------------------------------------------------------------


def to_rumi(obj: xr.DataArray | xr.Dataset, path: str | os.PathLike[str], *,
            tile_size: int = 512, codec: str = DEFAULT_CODEC, frame: str = "plane",
            error: Any = None, band_dim: str = "band", time_dim: str = "time",
            variable: Hashable | None = None, time: Any = None, crs: Any = None,
            progress: bool | None = None, encode_cf: bool = True, dtype: Any = None,
            masks: str = "nodata", any_suffix: bool = False, overviews: Any = None,
            overview_resampling: str = "average") -> bytes:
    """Write an xarray object as a Rumi file.

    What is written, and where it comes from:

    - **data**: a DataArray; or from a Dataset, ``variable``, else
      ``band_data``, else its only raster variable (one with y and x
      dimensions), else all its raster variables as one band each, named by
      variable (the layout ``band_as_variable=True`` opens; a variable's
      ``long_name`` whose first field is its name, as that layout keeps the
      full text ``"B04, Red, 665nm"`` for ``B04``, is stored instead). Dimensions may
      come in any order and are transposed to ``(time, band, y, x)``;
      ``band`` and ``time`` may be missing (one band, one time step).
      y/x are the dimensions named ``y``/``lat``/``latitude`` and
      ``x``/``lon``/``longitude``, or the two remaining ones, in order.
    - **band names**: the ``band_text`` coordinate (the full texts
      rumi_xarray opened, e.g. ``"B04, Red, 665nm"``), else the ``band``
      coordinate as text, else the GDAL band descriptions of a rioxarray
      object (numbered bands, ``long_name``), else the variable name for a
      single named band, else ``band_1``, ``band_2``...
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
      attributes, else from rioxarray's ``obj.rio.crs`` when installed;
      ``crs=`` replaces it (or supplies one, e.g. for netCDF lat/lon grids
      without a grid mapping).
      ``AREA_OR_POINT == "Point"`` records PixelIsPoint: the stored origin is
      then the centre of pixel (0, 0). No coordinates and no CRS writes an
      image without georeferencing; a transform without a CRS (or the
      reverse) is an error.

    - **nodata, scale, offset, units** (the format has no field for them)
      go to the sidecar ``<path>.aux.json``, which ``open_dataset`` reads:
      from CF attributes or encoding (``_FillValue``, ``missing_value``,
      ``scale_factor``, ``add_offset``, ``units``) and so rioxarray's
      ``rio.nodata``/``rio.encoded_nodata``; rioxarray's per-band
      ``scales``/``offsets`` when they are equal. A variable decoded in
      memory (``mask_and_scale=True``: floats with NaN, the packing in
      ``encoding``) is packed back to its encoded dtype with xarray's own CF
      encoder, as ``to_netcdf`` does, and every value is checked to fit;
      ``encode_cf=False`` stores the decoded values instead (``dtype=``
      e.g. ``"float32"`` then chooses their type). What cannot be stored is
      warned about: per-band scales or offsets that differ (the decoded
      values are stored), per-band units that differ (kept per band with
      the attributes, below).
    - **attributes** (GDAL tags, netCDF globals...) go to the sidecar too,
      under ``attributes``: the Dataset's ``attrs``, the variable's, and
      each band's (a rioxarray DataArray's band tags as ``convert`` opens
      it, the variables of a Dataset written as bands, or what a Rumi
      Dataset kept in ``encoding["rumi_band_attributes"]``). Facts and
      georeferencing are not repeated there; values JSON cannot hold
      exactly are stored as text, with a warning.

    Values are otherwise written as they are in memory: big-endian samples
    are byte-swapped (losslessly).

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
        Numpy-, dask- or lazily backed. Dask input stays lazy: it is
        compressed frame by frame in parallel dask tasks. Other input is
        chunked to frames first, so lazily opened files are read a frame at
        a time too.
    path : str or os.PathLike
        Local destination ending in ``.rumi``, replaced atomically; on any
        failure nothing is left behind (an existing file is kept as it was).
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
    crs : int, str or pyproj.CRS, optional
        The CRS to record instead of the data's own (which may be missing):
        an EPSG code, ``"EPSG:4326"``, WKT, or anything with ``to_epsg()``.
    progress : bool, optional
        Show a progress bar (frames compressed). ``None`` follows
        ``rx.set_options(progress=...)``: by default, in terminals and
        notebooks.
    encode_cf : bool, default True
        Pack CF-decoded variables back to their encoded dtype (scale, offset,
        nodata in the sidecar); False stores the decoded values (NaN where
        nodata was, nodata then recorded as NaN).
    dtype : numpy dtype-like, optional
        The type of the stored samples: with ``encode_cf=False`` the type
        decoded values are cast to (``"float32"`` halves float64 data); with
        packing, the packed type (as ``to_netcdf``'s encoding ``dtype``).
        Values that do not fit raise ``ValueError``.
    masks : {"nodata", "band", "ignore"}, default "nodata"
        A GDAL alpha band or per-dataset (internal) mask of the GeoTIFF the
        data were opened from (``rioxarray.open_rasterio``): ``"nodata"``
        writes masked samples as a value no unmasked sample holds and records
        it as nodata, so ``mask_and_scale=True`` masks what rioxarray masks
        (refused, naming this option, when no value is free); ``"band"``
        adds the mask as a band ``mask`` (0 masked, 255 valid); ``"ignore"``
        drops it. Never dropped without being asked.
    any_suffix : bool, default False
        Write ``path`` even when its name does not end in ``.rumi`` (refused
        by default: GDAL and other tools that go by the suffix fail on a
        Rumi file named ``.tif``).
    overviews : None, "auto" or list of int, optional
        Overview levels as GDAL's COG driver makes them: ``"auto"`` halves
        the image until it fits within one tile (``OVERVIEWS=AUTO``), a list
        of factors such as ``[2, 4, 8]`` makes levels of ``ceil(size /
        factor)`` pixels (``gdaladdo``). Level ``k`` is the Rumi file
        ``<path>.ovr<factor>`` beside ``path``, recorded in the sidecar and
        opened with ``xr.open_dataset(path, engine="rumi", overview_level=k)``.
    overview_resampling : {"average", "nearest"}, default "average"
        GDAL's ``AVERAGE`` (nodata left out of the averages) or ``NEAREST``,
        computed as GDAL computes them; other resamplings are refused.

    Returns
    -------
    bytes
        The file's external header.

    Raises
    ------
    RumiWriteValueError
        Options, labels or georeferencing Rumi cannot store, naming the
        destination: an unknown ``codec`` or ``frame``, a ``tile_size``
        outside 1 to 65535, duplicate or empty band names,
        missing/NaT/fractional-second/non-increasing times (data without a
        time coordinate need ``time=``), a CRS without an EPSG code, a
        transform without a CRS, irregular coordinates, extra dimensions.
        Raised before any frame is compressed. A :class:`RumiWriteError`
        and a ``ValueError``.
    RumiFormatError
        Values that do not fit the stored type, found while compressing (a
        ``ValueError``; nothing is written).
    TypeError
        A sample type Rumi cannot store (datetime64, object, strings...).
    RumiWriteError
        The destination cannot be written (an ``OSError``).

    Examples
    --------
    >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
    >>> header = rx.to_rumi(ds.band_data.isel(time=slice(0, 2)), "two_dates.rumi", tile_size=64)
    >>> dict(xr.open_dataset("two_dates.rumi", engine="rumi").band_data.sizes)
    {'time': 2, 'band': 4, 'y': 128, 'x': 128}
    """
    from rumi_xarray.dask.chunks import write_chunks  # dask only once something is written

    target = os.fsdecode(path)
    with as_write_value_errors(target):
        target = _target(path)
        check_suffix(target, any_suffix)
        pattern = _pattern(target, frame, None)
        _check_tile_size(target, tile_size)
        # Refused before the data is prepared (the sizes are checked by write_array).
        levels_model.plan_levels(1, 1, overviews, tile_size)
        levels_model.check_resampling(overview_resampling)
        prepared = prepare(obj, target, band_dim=band_dim, time_dim=time_dim,
                           variable=variable, time=time, crs=crs,
                           chunks=write_chunks(frame_axes(pattern, tile_size), tile_size),
                           encode_cf=encode_cf, dtype=dtype, masks=masks)
    data = prepared.data.data
    facts = prepared.sidecar.facts
    return write_array(target, data, bands=prepared.bands, time=prepared.time,
                       transform=prepared.transform, crs=prepared.crs,
                       pixel_is_point=prepared.pixel_is_point, tile_size=tile_size,
                       codec=codec, error=error, pattern=pattern, progress=progress,
                       nodata=facts.nodata, scale_factor=facts.scale, add_offset=facts.offset,
                       units=facts.units, decoded_dtype=facts.decoded_dtype,
                       crs_wkt=prepared.sidecar.crs_wkt,
                       geotransform=prepared.sidecar.geotransform, any_suffix=any_suffix,
                       attributes=prepared.sidecar.attributes, overviews=overviews,
                       overview_resampling=overview_resampling)
