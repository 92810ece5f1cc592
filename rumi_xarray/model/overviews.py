"""Overviews as GDAL's COG driver makes them: level sizes, transforms, resampling.

Pure numpy, no I/O. Every rule here is GDAL's (3.10), checked against GDAL
itself in the tests (a GeoTIFF turned into a COG by ``rasterio.shutil.copy``,
read back with ``overview_level=``):

- **Levels.** ``"auto"`` is the COG driver's ``OVERVIEWS=AUTO``: halve the
  previous level (integer division, per axis) while either side is larger
  than one block (the file's tile size), so the last level fits within one
  tile; the factors are 2, 4, 8... Explicit factors are ``gdaladdo``'s: the
  level of factor ``f`` is ``ceil(size / f)`` per axis (``DIV_ROUND_UP``).
- **Transform.** GDAL's ``GDALOverviewDataset::GetGeoTransform``: the origin
  stays, each coefficient is scaled by the ratio of the base size to the level
  size of its axis (what ``rasterio.open(..., overview_level=k).transform``
  reports), so an odd size gives a pixel slightly larger than ``factor`` times
  the base's.
- **Cascade.** Each level is computed from the previous one (the base for the
  first), as GDAL regenerates overviews, not from the base each time.
- **AVERAGE** (``GDALResampleChunk_AverageOrRMS``): the source window of an
  output pixel spans ``[i * r, (i + 1) * r)`` source pixels, ``r`` the size
  ratio; partly covered edge pixels are weighted by their coverage; nodata
  samples are left out (no valid sample gives nodata); 8- and 16-bit unsigned
  samples round half up, other integers are averaged in float32 (up to 16
  bits) or float64 and rounded half away from zero; an average that lands on
  the nodata value is moved off it (GDAL's replacement value: one count up,
  or down at the type's maximum). Floats without a declared nodata average
  their NaN as GDAL does (it propagates).
- **NEAREST** (``GDALResampleChunk_Near``): output pixel ``i`` takes source
  pixel ``int(0.5 + i * r)`` on each axis.

The arithmetic follows GDAL's operation order (weights, sums, rounding), so
integer results equal GDAL's; float results agree to the last bit or two
(GDAL's SIMD path for exact halving sums in another order).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The resamplings overviews are computed with, as GDAL names them (lower case).
RESAMPLINGS = ("average", "nearest")
#: What ``overviews=`` takes besides a list of factors.
AUTO = "auto"
#: A level file's name: the base file's name and ``.ovr<factor>`` (GDAL keeps external
#: overviews in ``<file>.ovr``). No ``.rumi`` suffix, so a glob ``*.rumi`` for scenes
#: never picks up a level as a scene.
LEVEL_MARK = ".ovr"
#: Output rows computed at once: bounds the memory of a level's temporaries.
_STRIP_ROWS = 256
#: GDAL's epsilon on window bounds ("avoid numerical precision issues").
_EPSILON = 1e-8


@dataclass(frozen=True)
class Level:
    """One overview level of a raster: its factor and size.

    Parameters
    ----------
    factor : int
        The nominal decimation factor (2, 4, 8... for ``"auto"``); the exact
        ratio per axis is the base size over the level size.
    height, width : int
        The level's size in pixels.
    """

    factor: int
    height: int
    width: int

    @property
    def shape(self) -> tuple[int, int]:
        """Return ``(height, width)``."""
        return (self.height, self.width)


def auto_levels(height: int, width: int, block: int) -> tuple[Level, ...]:
    """Return the levels GDAL's COG driver makes with ``OVERVIEWS=AUTO``.

    Parameters
    ----------
    height, width : int
        The base image's size.
    block : int
        The block (tile) size: levels are added while either side of the last
        one is larger.

    Returns
    -------
    tuple of Level
        Factors 2, 4, 8...; each level half the previous one (integer
        division), never smaller than one pixel. Empty when the image fits
        within one block.

    Examples
    --------
    >>> [(lv.factor, lv.height, lv.width) for lv in auto_levels(777, 1001, 128)]
    [(2, 388, 500), (4, 194, 250), (8, 97, 125)]
    """
    levels = []
    h, w, factor = int(height), int(width), 1
    while h > block or w > block:
        h, w, factor = max(1, h // 2), max(1, w // 2), factor * 2
        levels.append(Level(factor, h, w))
    return tuple(levels)


def factor_levels(height: int, width: int, factors: Sequence[int]) -> tuple[Level, ...]:
    """Return the levels ``gdaladdo`` makes for explicit factors: ``ceil(size / factor)``.

    Parameters
    ----------
    height, width : int
    factors : sequence of int
        Increasing factors, each 2 or more (:func:`check_factors`).

    Returns
    -------
    tuple of Level

    Examples
    --------
    >>> [(lv.factor, lv.height, lv.width) for lv in factor_levels(777, 1001, [2, 4, 8])]
    [(2, 389, 501), (4, 195, 251), (8, 98, 126)]
    """
    return tuple(Level(int(f), -(-int(height) // int(f)), -(-int(width) // int(f)))
                 for f in factors)


def check_factors(value: Any) -> tuple[int, ...]:
    """Return explicit overview factors, checked: integers of 2 or more, increasing.

    Parameters
    ----------
    value : sequence of int

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        An empty list, a factor that is not an integer of 2 or more, or
        factors not strictly increasing.

    Examples
    --------
    >>> check_factors([2, 4, 8])
    (2, 4, 8)
    """
    factors = list(value)
    if not factors:
        raise ValueError("overviews=[] names no level (give factors such as [2, 4, 8], "
                         "'auto', or None for no overviews)")
    for f in factors:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 2:
            raise ValueError(f"overview factor {f!r} is not an integer of 2 or more")
    if any(b <= a for a, b in itertools.pairwise(factors)):
        raise ValueError(f"overview factors {factors} must be strictly increasing")
    return tuple(int(f) for f in factors)


def plan_levels(height: int, width: int, overviews: Any, block: int) -> tuple[Level, ...]:
    """Return the levels ``overviews=`` asks for an image of this size.

    Parameters
    ----------
    height, width : int
    overviews : None, "auto" or sequence of int
        ``None``: none; ``"auto"``: :func:`auto_levels`; factors:
        :func:`factor_levels`.
    block : int
        The file's tile size (``"auto"`` stops once a level fits one tile).

    Returns
    -------
    tuple of Level

    Raises
    ------
    ValueError
        ``overviews`` is none of these.

    Examples
    --------
    >>> plan_levels(100, 100, "auto", 512)
    ()
    """
    if overviews is None:
        return ()
    if isinstance(overviews, str):
        if overviews.strip().lower() != AUTO:
            raise ValueError(f"overviews={overviews!r} is not 'auto', a list of factors "
                             f"such as [2, 4, 8], or None")
        return auto_levels(height, width, block)
    try:
        factors = check_factors(overviews)
    except TypeError:
        raise ValueError(f"overviews={overviews!r} is not 'auto', a list of factors such as "
                         f"[2, 4, 8], or None") from None
    return factor_levels(height, width, factors)


def check_resampling(value: Any) -> str:
    """Return an overview resampling's name, checked (``"average"`` or ``"nearest"``).

    Parameters
    ----------
    value : str
        Any case (GDAL's spelling ``"AVERAGE"`` too).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        Another resampling: only these two are computed exactly as GDAL does.

    Examples
    --------
    >>> check_resampling("AVERAGE")
    'average'
    """
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in RESAMPLINGS:
        raise ValueError(f"overview_resampling={value!r} is not one of {list(RESAMPLINGS)} "
                         f"(the resamplings computed exactly as GDAL's COG driver does)")
    return str(name)


def check_dtype(dtype: Any, resampling: str) -> None:
    """Raise when samples of ``dtype`` cannot be resampled so.

    Nearest picks samples and takes any type; averaging needs numbers GDAL
    averages (integers and floats, not booleans or complex numbers).

    Parameters
    ----------
    dtype : numpy dtype-like
    resampling : str

    Raises
    ------
    ValueError
    """
    kind = np.dtype(dtype).kind
    if resampling == "average" and kind not in "uif":
        raise ValueError(f"overview_resampling='average' cannot average {np.dtype(dtype)} "
                         f"samples; use overview_resampling='nearest'")


def level_transform(transform: Sequence[float], base: tuple[int, int],
                    level: tuple[int, int], pixel_is_point: bool = False
                    ) -> tuple[float, ...]:
    """Return an overview level's transform, as GDAL derives it from the base's.

    Parameters
    ----------
    transform : sequence of float
        The base's six coefficients in rasterio order ``(a, b, c, d, e, f)``.
    base, level : (int, int)
        ``(height, width)`` of the base and the level.
    pixel_is_point : bool
        The origin is the centre of pixel (0, 0) rather than its corner: the
        corner is scaled, as GDAL does, and the level's centre reported.

    Returns
    -------
    tuple of float

    Examples
    --------
    >>> level_transform((10.0, 0.0, 399960.0, 0.0, -10.0, 5900040.0), (777, 1001), (388, 500))
    (20.019999999999996, 0.0, 399960.0, 0.0, -20.02577319587629, 5900040.0)
    """
    a, b, c, d, e, f = (float(v) for v in transform)
    x_ratio = float(base[1]) / level[1]
    y_ratio = float(base[0]) / level[0]
    if pixel_is_point:  # the corner of pixel (0, 0), as GDAL reads PixelIsPoint
        c, f = c - 0.5 * a - 0.5 * b, f - 0.5 * d - 0.5 * e
    # GDAL order (c, a, b, f, d, e): gt[1] and gt[4] scale with x, gt[2] and gt[5] with y.
    a, b, d, e = a * x_ratio, b * y_ratio, d * x_ratio, e * y_ratio
    if pixel_is_point:
        c, f = c + 0.5 * a + 0.5 * b, f + 0.5 * d + 0.5 * e
    return (a, b, c, d, e, f)


def level_file_name(base_name: str, factor: int) -> str:
    """Return the file name of a level: the base's name and ``.ovr<factor>``.

    Parameters
    ----------
    base_name : str
        The base file's name (no directory).
    factor : int

    Returns
    -------
    str

    Examples
    --------
    >>> level_file_name("scene.rumi", 4)
    'scene.rumi.ovr4'
    """
    return f"{base_name}{LEVEL_MARK}{int(factor)}"


def is_level_file_of(name: str, base_name: str) -> bool:
    """Return whether ``name`` is a level file name of ``base_name`` (any factor).

    Examples
    --------
    >>> is_level_file_of("scene.rumi.ovr16", "scene.rumi"), is_level_file_of("x.rumi", "scene.rumi")
    (True, False)
    """
    return re.fullmatch(re.escape(base_name + LEVEL_MARK) + r"[1-9][0-9]*", name) is not None


def check_file_name(name: Any) -> str:
    """Return a level's recorded file name, refusing anything but a plain name.

    A sidecar names its levels relative to the file, in the same folder: a
    path, a URL or ``..`` would send a reader elsewhere.

    Parameters
    ----------
    name : object

    Returns
    -------
    str

    Raises
    ------
    ValueError

    Examples
    --------
    >>> check_file_name("scene.rumi.ovr2")
    'scene.rumi.ovr2'
    """
    if (not isinstance(name, str) or not name or name in (".", "..")
            or any(ch in name for ch in "/\\:?#\x00") or name != name.strip()):
        raise ValueError(f"overview file {name!r} is not a plain file name in the file's "
                         f"folder")
    return name


# --- resampling --------------------------------------------------------------------


@dataclass(frozen=True)
class _Axis:
    """GDAL's source window of each output pixel along one axis (average).

    For output pixel ``i`` of ``n`` from ``m`` source pixels (ratio
    ``r = m / n``): pixels ``start`` to ``stop`` (exclusive) cover
    ``[i * r, (i + 1) * r)``; the first weighs ``near`` (its covered part),
    the last ``far``, those between 1; ``full`` is their sum, added in
    GDAL's order.
    """

    start: np.ndarray
    stop: np.ndarray
    near: np.ndarray
    far: np.ndarray
    full: np.ndarray

    @classmethod
    def of(cls, src: int, dst: int) -> _Axis:
        """Return the windows of ``dst`` output pixels over ``src`` source pixels."""
        ratio = src / dst
        index = np.arange(dst, dtype=np.float64)
        lo = index * ratio
        hi = (index + 1) * ratio
        start = np.floor(lo + _EPSILON).astype(np.int64)
        stop = np.ceil(hi - _EPSILON).astype(np.int64)
        stop = np.where(stop == start, stop + 1, stop)
        stop = np.minimum(stop, src)
        near = np.where(stop == start + 1, 1.0, 1 - (lo - start))
        far = 1 - (stop - hi)
        many = start + 1 < stop
        full = near.copy()
        # Added as GDAL adds them: the middle pixels' count, then the far weight.
        full[many] += (stop - start - 2)[many]
        full[many] += far[many]
        return cls(start, stop, near, far, full)

    @property
    def span(self) -> int:
        """Return the widest window, in source pixels."""
        return int((self.stop - self.start).max()) if self.start.size else 0

    @property
    def halving(self) -> bool:
        """Return whether every window is two pixels, each starting where the last ended."""
        return bool(np.all(self.stop - self.start == 2)
                    and np.all(self.start[1:] == self.stop[:-1]))

    def part(self, rows: slice) -> _Axis:
        """Return the windows of output pixels ``rows`` only."""
        return _Axis(self.start[rows], self.stop[rows], self.near[rows], self.far[rows],
                     self.full[rows])


def _work_type(dtype: np.dtype) -> np.dtype:
    """Return the type GDAL averages samples of ``dtype`` in (``GDALGetOvrWorkDataType``)."""
    if dtype in (np.dtype("uint8"), np.dtype("uint16")):
        return dtype
    if (dtype.kind in "iuf" and dtype.itemsize <= 2) or dtype == np.dtype("float32"):
        return np.dtype("float32")
    return np.dtype("float64")


def replacement(nodata: float, dtype: Any) -> Any:
    """Return the value GDAL writes instead of an average equal to nodata.

    ``GDALGetNoDataReplacementValue``: integers one count up (down at the
    type's maximum); floats the next representable value up (down at the
    maximum).

    Parameters
    ----------
    nodata : float
    dtype : numpy dtype-like
        The overview's sample type.

    Returns
    -------
    number

    Examples
    --------
    >>> replacement(0, "uint16"), replacement(255, "uint8")
    (1, 254)
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        value = int(nodata)
        return value - 1 if value == int(np.iinfo(dtype).max) else value + 1
    top = dtype.type(np.finfo(dtype).max)
    value_f = dtype.type(nodata)
    return np.nextafter(value_f, dtype.type(0) if value_f == top else top)


def downsample(plane: np.ndarray, height: int, width: int, resampling: str,
               nodata: Any = None) -> np.ndarray:
    """Return one overview plane computed from the next larger one, as GDAL computes it.

    Parameters
    ----------
    plane : numpy.ndarray
        ``(y, x)`` samples of the base or of the previous level.
    height, width : int
        The level's size.
    resampling : {"average", "nearest"}
    nodata : number, optional
        The samples' nodata value (NaN for floats): left out of averages.

    Returns
    -------
    numpy.ndarray
        ``(height, width)``, the dtype of ``plane``.

    Examples
    --------
    >>> a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype="uint8")
    >>> downsample(a, 1, 2, "average").tolist()
    [[4, 6]]
    >>> downsample(a, 1, 2, "nearest").tolist()
    [[1, 3]]
    """
    src_h, src_w = plane.shape
    if resampling == "nearest":
        rows = np.floor(0.5 + np.arange(height) * (src_h / height)).astype(np.int64)
        cols = np.floor(0.5 + np.arange(width) * (src_w / width)).astype(np.int64)
        return plane[np.ix_(rows, cols)]
    dtype = plane.dtype
    out = np.empty((height, width), dtype=dtype)
    ys, xs = _Axis.of(src_h, height), _Axis.of(src_w, width)
    # GDAL's fast path: exact halving on both axes and nothing to leave out.
    fast = ys.halving and xs.halving and nodata is None
    for top in range(0, height, _STRIP_ROWS):
        rows = slice(top, min(height, top + _STRIP_ROWS))
        first, last = int(ys.start[rows.start]), int(ys.stop[rows.stop - 1])
        strip = plane[first:last]
        if fast:
            out[rows] = _halve(strip, dtype)
        else:
            out[rows] = _average(strip, ys.part(rows), first, xs, dtype, nodata)
    return out


def _halve(strip: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Average 2 x 2 windows as GDAL's halving path does (no nodata, exact halving)."""
    a, b = strip[0::2, 0::2], strip[0::2, 1::2]
    c, d = strip[1::2, 0::2], strip[1::2, 1::2]
    work = _work_type(dtype)
    if work.kind == "u":  # (sum + 2) / 4 in integers: half up
        total = a.astype(np.uint32) + b + c + d
        return ((total + 2) // 4).astype(dtype)
    if work == np.dtype("float32"):
        # GDAL's SSE path: rows added first, then the two columns, times 0.25f.
        value = ((a.astype(np.float32) + c) + (b.astype(np.float32) + d)) * np.float32(0.25)
    else:
        value = (((a.astype(np.float64) + b) + c) + d) * 0.25
    return _store(value, dtype)


def _average(strip: np.ndarray, ys: _Axis, first: int, xs: _Axis, dtype: np.dtype,
             nodata: Any) -> np.ndarray:
    """Average the weighted windows of a strip of output rows (GDAL's general path)."""
    values = strip.astype(np.float64)
    valid: np.ndarray | None = None
    if nodata is not None:
        valid = np.isnan(values) if _isnan(nodata) else values == float(nodata)
        np.logical_not(valid, out=valid)
        values[~valid] = 0.0  # adds nothing where GDAL skips the sample
    line, line_weight, line_count = _lines(values, valid, xs)
    y0 = ys.start - first
    y1 = ys.stop - first
    total = np.zeros((y0.size, line.shape[1]))
    weight = np.zeros_like(total) if valid is not None else None
    count = np.zeros(total.shape, dtype=np.int64) if valid is not None else None
    last_row = line.shape[0] - 1
    for j in range(ys.span):
        row = y0 + j
        inside = (row < y1)[:, None]
        take = np.minimum(row, last_row)
        wy = np.where(j == 0, ys.near, np.where(row + 1 == y1, ys.far, 1.0))[:, None]
        total += np.where(inside, line[take] * wy, 0.0)
        if weight is not None and count is not None:
            weight += np.where(inside, line_weight[take] * wy, 0.0)
            count += np.where(inside, line_count[take], 0)
    if weight is None:
        weight = xs.full[None, :] * ys.full[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / weight
    work = _work_type(dtype)
    value = np.floor(mean + 0.5) if work.kind == "u" else mean.astype(work)
    if nodata is not None and not _isnan(nodata):
        value[value == work.type(nodata)] = replacement(nodata, dtype)
    # No valid sample: 0 / 0, replaced by nodata below.
    out = np.nan_to_num(value).astype(dtype) if work.kind == "u" else _store(value, dtype)
    if count is not None:
        out[count == 0] = dtype.type(nodata)
    return out


def _lines(values: np.ndarray, valid: np.ndarray | None, xs: _Axis
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return each source row's window sums along x, their weights and valid counts."""
    last_col = values.shape[1] - 1
    many = xs.start + 1 < xs.stop
    line = values[:, xs.start] * xs.near
    weight = count = np.empty(0)
    if valid is not None:
        ok = valid[:, xs.start]
        weight = np.where(ok, xs.near, 0.0)
        count = ok.astype(np.int64)
    for j in range(1, xs.span - 1):  # the middle pixels, left to right
        col = xs.start + j
        inside = col + 1 < xs.stop
        take = np.minimum(col, last_col)
        line += np.where(inside, values[:, take], 0.0)
        if valid is not None:
            ok = valid[:, take] & inside
            weight += ok
            count += ok
    far = xs.stop - 1
    line += np.where(many, values[:, far] * xs.far, 0.0)
    if valid is not None:
        ok = valid[:, far] & many
        weight += np.where(ok, xs.far, 0.0)
        count += ok
    return line, weight, count


def _isnan(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _store(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Return averages (float32 or float64) as samples, as GDAL copies them (``GDALCopyWords``).

    Floats are cast; integers are rounded half away from zero in the
    averages' own precision and clamped to the type's range.
    """
    if dtype.kind == "f":
        return value.astype(dtype)
    half = value.dtype.type(0.5)
    rounded = np.where(value >= 0, value + half, value - half)
    info = np.iinfo(dtype)
    rounded = np.clip(np.nan_to_num(rounded), info.min, info.max)
    return np.trunc(rounded).astype(dtype)


def pyramid(plane: np.ndarray, levels: Sequence[Level], resampling: str,
            nodata: Any = None) -> list[np.ndarray]:
    """Return every level of one plane, each computed from the previous one (GDAL's cascade).

    Parameters
    ----------
    plane : numpy.ndarray
        ``(y, x)`` base samples.
    levels : sequence of Level
        Largest first.
    resampling : {"average", "nearest"}
    nodata : number, optional

    Returns
    -------
    list of numpy.ndarray

    Examples
    --------
    >>> a = np.arange(64, dtype="uint16").reshape(8, 8)
    >>> [p.shape for p in pyramid(a, factor_levels(8, 8, [2, 4]), "average")]
    [(4, 4), (2, 2)]
    """
    out = []
    previous = plane
    for level in levels:
        previous = downsample(previous, level.height, level.width, resampling, nodata)
        out.append(previous)
    return out


# --- choosing a level ---------------------------------------------------------------


def read_shrink(scale: float, tol: float = 1e-3) -> int:
    """Return the integer shrink a read at ``scale`` source pixels per output pixel allows.

    odc-geo's ``_pick_read_scale``: below 1 it is 1; within ``tol`` below an
    integer it is that integer; otherwise the integer below.

    Parameters
    ----------
    scale : float
        Output pixel size over source pixel size (the smaller of the two axes).
    tol : float

    Returns
    -------
    int

    Examples
    --------
    >>> read_shrink(2.9999), read_shrink(2.8), read_shrink(0.3)
    (3, 2, 1)
    """
    if not scale > 0 or not math.isfinite(scale):
        return 1
    if scale < 1:
        return 1
    nearest = round(scale)
    if abs(scale - nearest) < tol:
        return int(nearest)
    return int(scale)


def pick_level(shrink: int, factors: Sequence[int]) -> int | None:
    """Return the overview level a read shrunk by ``shrink`` uses, as odc-stac picks it.

    odc-loader's ``pick_overview``: the coarsest level whose factor is not
    larger than the shrink; ``None`` (full resolution) when there is none.

    Parameters
    ----------
    shrink : int
        :func:`read_shrink` of the requested resolution.
    factors : sequence of int
        The source's overview factors, increasing.

    Returns
    -------
    int or None

    Examples
    --------
    >>> pick_level(5, [2, 4, 8]), pick_level(1, [2, 4]), pick_level(8, [2, 4, 8])
    (1, None, 2)
    """
    if not factors or shrink < factors[0]:
        return None
    chosen = 0
    for index, factor in enumerate(factors):
        if factor > shrink:
            break
        chosen = index
    return chosen
