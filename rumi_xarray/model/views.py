"""What an interactive map shows: the view, the level and stride that fit it, the stretch.

Pure: no I/O. A :class:`View` is a window of the full-resolution image (what
the user zoomed to). :func:`choose_level` picks the overview level that fits
the view on a screen, :func:`plan_map` turns view and level into the samples
to read (a :class:`MapGrid`: a window of that level, every ``step``-th pixel),
and :meth:`MapGrid.full_pixel` maps a pixel of the shown map back to the
full-resolution pixel a click on it means. :func:`stretch_limits` and
:func:`to_unit` give the percentile stretch of a map's values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Long side, in samples, of the map the explorer reads by default: about what a
#: notebook's output area shows without scaling the image down.
MAX_PIXELS = 1024
#: Smallest view, in full-resolution pixels on its long side, a zoom goes down to.
MIN_VIEW = 16


@dataclass(frozen=True)
class View:
    """A window of the full-resolution image: ``(row, col, height, width)``.

    Examples
    --------
    >>> View(0, 0, 512, 512).zoom(0.5, 100, 100, (512, 512))
    View(row=0, col=0, height=256, width=256)
    """

    row: int
    col: int
    height: int
    width: int

    @property
    def long_side(self) -> int:
        """Return the longer of height and width."""
        return max(self.height, self.width)

    def zoom(self, scale: float, row: int, col: int, bounds: tuple[int, int] | View,
             min_size: int = MIN_VIEW) -> View:
        """Return this view scaled by ``scale`` around pixel ``(row, col)``, inside ``bounds``.

        ``scale`` < 1 zooms in (a smaller window), > 1 out. The aspect ratio
        is kept until the view meets the bounds; the view is shifted, never
        cut, to stay inside them.

        Parameters
        ----------
        scale : float
        row, col : int
            Full-resolution pixel that becomes the centre of the view.
        bounds : (height, width) or View
            What may be shown: the whole image, or a window of it.
        min_size : int, default MIN_VIEW
            Smallest long side a zoom reaches.

        Returns
        -------
        View
        """
        box = bounds if isinstance(bounds, View) else View(0, 0, *bounds)
        long_side = max(self.long_side * scale, min(min_size, box.long_side))
        ratio = long_side / self.long_side
        height = min(box.height, max(1, round(self.height * ratio)))
        width = min(box.width, max(1, round(self.width * ratio)))
        top = min(max(row - height // 2, box.row), box.row + box.height - height)
        left = min(max(col - width // 2, box.col), box.col + box.width - width)
        return View(top, left, height, width)


def choose_level(height: int, width: int, factors: Sequence[int],
                 max_pixels: int = MAX_PIXELS) -> int | None:
    """Return the overview level to show a ``height x width`` view from, or None.

    The one rule deciding which level a map reads: the finest resolution at
    which the view fits within ``max_pixels`` on its long side. ``None`` is
    the full resolution (it fits, or there are no overviews); otherwise the
    position in ``factors`` (rioxarray's ``overview_level``: 0 is the first
    overview) of the finest overview that fits, or of the coarsest when none
    does (the map then also skips samples, :func:`plan_map`).

    Parameters
    ----------
    height, width : int
        The view, in full-resolution pixels.
    factors : sequence of int
        Decimation factor of each overview, finest first (``[2, 4, 8]``).
    max_pixels : int, default MAX_PIXELS

    Returns
    -------
    int or None

    Examples
    --------
    >>> choose_level(4096, 3000, [2, 4, 8], max_pixels=1024)
    1
    >>> choose_level(800, 600, [2, 4, 8], max_pixels=1024) is None
    True
    >>> choose_level(4096, 4096, [], max_pixels=1024) is None
    True
    """
    long_side = max(height, width)
    if long_side <= max_pixels or not factors:
        return None
    for level, factor in enumerate(factors):
        if math.ceil(long_side / factor) <= max_pixels:
            return level
    return len(factors) - 1


@dataclass(frozen=True)
class MapGrid:
    """The samples a map shows: a window of one level, every ``step``-th pixel.

    Attributes
    ----------
    level : int or None
        Overview level read (``None``: full resolution).
    factor : int
        Full-resolution pixels per level pixel along each axis (1 at full
        resolution).
    row, col : int
        First level pixel shown.
    step : int
        Level pixels between two map pixels.
    height, width : int
        Map size in samples.
    full_height, full_width : int
        Size of the full-resolution image (edge blocks of an overview are clipped
        to it).
    """

    level: int | None
    factor: int
    row: int
    col: int
    step: int
    height: int
    width: int
    full_height: int
    full_width: int

    @property
    def rows(self) -> slice:
        """Return the level rows the map reads."""
        return slice(self.row, self.row + self.height * self.step, self.step)

    @property
    def cols(self) -> slice:
        """Return the level columns the map reads."""
        return slice(self.col, self.col + self.width * self.step, self.step)

    @property
    def pixel_size(self) -> int:
        """Return full-resolution pixels per map pixel along each axis."""
        return self.factor * self.step

    def full_pixel(self, i: int, j: int) -> tuple[int, int]:
        """Return the full-resolution pixel that map pixel ``(i, j)`` stands for.

        At full resolution, the very sample shown; on an overview, the
        centre of the block of full-resolution pixels its sample summarises.

        Parameters
        ----------
        i, j : int
            Map row and column (clipped to the map).

        Returns
        -------
        tuple of int
            ``(row, col)`` in the full-resolution image.
        """
        i = min(max(int(i), 0), self.height - 1)
        j = min(max(int(j), 0), self.width - 1)
        return (self._centre(self.row + i * self.step, self.full_height),
                self._centre(self.col + j * self.step, self.full_width))

    def at_full_resolution(self) -> MapGrid:
        """Return the same map read from the full resolution: each block's first pixel.

        For a date whose file lacks the level chosen (a catalog cube of files
        written with different overviews): the map keeps its size and place.

        Returns
        -------
        MapGrid

        Examples
        --------
        >>> g = MapGrid(level=1, factor=4, row=2, col=3, step=2, height=5, width=6,
        ...             full_height=64, full_width=64)
        >>> full = g.at_full_resolution()
        >>> (full.level, full.rows, full.cols, full.full_pixel(1, 1) == g.full_pixel(1, 1))
        (None, slice(8, 48, 8), slice(12, 60, 8), False)
        """
        f = self.factor
        return MapGrid(level=None, factor=1, row=self.row * f, col=self.col * f,
                       step=self.step * f, height=self.height, width=self.width,
                       full_height=self.full_height, full_width=self.full_width)

    def _centre(self, level_pixel: int, full: int) -> int:
        first = level_pixel * self.factor
        last = min(first + self.factor, full) - 1
        return first + (last - first) // 2


def plan_map(view: View, full_shape: tuple[int, int], factors: Sequence[int],
             level_shape: Callable[[int], tuple[int, int]] | None = None,
             max_pixels: int = MAX_PIXELS) -> MapGrid:
    """Return what a map of ``view`` reads: level (:func:`choose_level`), window, stride.

    Parameters
    ----------
    view : View
        In full-resolution pixels.
    full_shape : (int, int)
        ``(height, width)`` of the full-resolution image.
    factors : sequence of int
        Overview factors, finest first (empty: none).
    level_shape : callable, optional
        ``(height, width)`` of overview ``k``, asked only for the level
        chosen; GDAL's ``ceil(size / factor)`` when omitted.
    max_pixels : int, default MAX_PIXELS

    Returns
    -------
    MapGrid

    Examples
    --------
    >>> grid = plan_map(View(0, 0, 512, 512), (512, 512), [], max_pixels=256)
    >>> (grid.level, grid.step, grid.height, grid.full_pixel(1, 2))
    (None, 2, 256, (2, 4))
    """
    height, width = full_shape
    level = choose_level(view.height, view.width, factors, max_pixels)
    factor = 1 if level is None else int(factors[level])
    if level is None:
        level_h, level_w = height, width
    elif level_shape is not None:
        level_h, level_w = level_shape(level)
    else:
        level_h, level_w = math.ceil(height / factor), math.ceil(width / factor)
    r0 = min(view.row // factor, level_h - 1)
    c0 = min(view.col // factor, level_w - 1)
    r1 = min(max(math.ceil((view.row + view.height) / factor), r0 + 1), level_h)
    c1 = min(max(math.ceil((view.col + view.width) / factor), c0 + 1), level_w)
    step = max(1, math.ceil(max(r1 - r0, c1 - c0) / max_pixels))
    return MapGrid(level=level, factor=factor, row=r0, col=c0, step=step,
                   height=math.ceil((r1 - r0) / step), width=math.ceil((c1 - c0) / step),
                   full_height=height, full_width=width)


def stretch_limits(values: np.ndarray, percentiles: tuple[float, float] = (2.0, 98.0)
                   ) -> np.ndarray:
    """Return ``(low, high)`` per band of a ``(band, y, x)`` map: its percentile stretch.

    NaN samples (nodata) are left out; a band without any finite sample, or
    with one value only, gets limits one apart so that it still displays.

    Parameters
    ----------
    values : numpy.ndarray
        ``(band, y, x)``.
    percentiles : (float, float), default (2, 98)

    Returns
    -------
    numpy.ndarray
        ``(band, 2)`` float64.

    Examples
    --------
    >>> stretch_limits(np.arange(101, dtype=float).reshape(1, 1, 101), (10, 90))
    array([[10., 90.]])
    """
    flat = np.asarray(values, dtype=np.float64).reshape(values.shape[0], -1)
    out = np.empty((flat.shape[0], 2))
    for b, band in enumerate(flat):
        finite = band[np.isfinite(band)]
        low, high = (np.percentile(finite, percentiles) if finite.size else (0.0, 1.0))
        if not high > low:
            high = low + 1.0
        out[b] = (low, high)
    return out


def to_unit(values: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """Return ``(band, y, x)`` values stretched to ``[0, 1]`` by per-band limits; NaN stays.

    Parameters
    ----------
    values : numpy.ndarray
        ``(band, y, x)``.
    limits : numpy.ndarray
        ``(band, 2)`` from :func:`stretch_limits`.

    Returns
    -------
    numpy.ndarray
        float64, clipped to ``[0, 1]``.

    Examples
    --------
    >>> to_unit(np.array([[[0.0, 5.0, 20.0]]]), np.array([[0.0, 10.0]]))
    array([[[0. , 0.5, 1. ]]])
    """
    low = limits[:, 0][:, None, None]
    high = limits[:, 1][:, None, None]
    scaled = (np.asarray(values, dtype=np.float64) - low) / (high - low)
    return np.clip(scaled, 0.0, 1.0)
