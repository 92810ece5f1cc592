"""Frame grid of a Rumi raster: tile geometry, frame shape and read groups.

Pure geometry: no I/O, no librumi, no dask. A Rumi file stores its samples as
frames on a square tile grid; the frames of one tile cell (every time step and
band it holds) are stored next to each other, cells in row-major order. A
*read group* is a block of whole frames that one native call reads at the cost
of one plan and one transport submission: it is the chunk shape rumi_xarray
prefers for dask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Dimensions of a cube, in order.
CUBE_DIMS = ("time", "band", "y", "x")


@dataclass(frozen=True)
class Grid:
    """Geometry shared by every scene of a dataset.

    Parameters
    ----------
    time_count, bands, height, width : int
        Extents of one scene.
    tile_height, tile_width : int
        Nominal tile size; edge tiles are clipped.
    frame_layout : str
        Axis order inside one frame, e.g. ``"h w"`` or ``"t b h w"``.
    index_order : tuple of str
        Axes the frame index walks inside a tile cell (``("t", "b")``,
        ``("b",)``, ``()``...).
    dtype : numpy.dtype
        Sample type.
    """

    time_count: int
    bands: int
    height: int
    width: int
    tile_height: int
    tile_width: int
    frame_layout: str
    index_order: tuple[str, ...]
    dtype: np.dtype

    @classmethod
    def from_metadata(cls, meta: Any) -> Grid:
        """Build the grid from ``rumi.Metadata``.

        Parameters
        ----------
        meta : rumi.Metadata

        Returns
        -------
        Grid
        """
        shape = tuple(meta.shape)
        if len(shape) == 3:
            shape = (1, *shape)
        dtype = meta.dtype.numpy_dtype
        if dtype is None:
            raise ValueError(f"rumi dtype {meta.dtype.name} has no numpy equivalent")
        return cls(time_count=int(shape[0]), bands=int(shape[1]), height=int(shape[2]),
                   width=int(shape[3]), tile_height=int(meta.tile[0]),
                   tile_width=int(meta.tile[1]), frame_layout=str(meta.frame_layout),
                   index_order=tuple(meta.index_order), dtype=np.dtype(dtype))

    @property
    def time_frame(self) -> int:
        """Time steps one frame holds: 1 when frames walk time, else all."""
        return 1 if "t" in self.index_order else self.time_count

    @property
    def band_frame(self) -> int:
        """Bands one frame holds: 1 when frames walk bands, else all."""
        return 1 if "b" in self.index_order else self.bands

    @property
    def frame_shape(self) -> tuple[int, int, int, int]:
        """Return the ``(time, band, y, x)`` extent of one (interior) frame."""
        return (self.time_frame, self.band_frame, self.tile_height, self.tile_width)

    @property
    def cells(self) -> tuple[int, int]:
        """Return the number of tile cells down and across."""
        return (-(-self.height // self.tile_height), -(-self.width // self.tile_width))

    def frames_touched(self, n_times: int, n_bands: int, row: int, col: int,
                       height: int, width: int) -> int:
        """Return how many frames a window read decodes.

        Parameters
        ----------
        n_times, n_bands : int
            Sizes of the time and band selections.
        row, col, height, width : int
            The window.

        Returns
        -------
        int
        """
        down = (row + height - 1) // self.tile_height - row // self.tile_height + 1
        across = (col + width - 1) // self.tile_width - col // self.tile_width + 1
        return down * across * self.frames_per_cell(n_times, n_bands)

    def frames_per_cell(self, n_times: int, n_bands: int) -> int:
        """Return the frames of one tile cell that a time/band selection decodes."""
        return ((n_times if "t" in self.index_order else 1)
                * (n_bands if "b" in self.index_order else 1))

    def same_layout(self, other: Grid) -> bool:
        """Return whether two scenes can share one ``read_many`` plan."""
        return (self.time_count, self.bands, self.tile_height, self.tile_width,
                self.frame_layout, self.index_order, self.dtype) == (
            other.time_count, other.bands, other.tile_height, other.tile_width,
                other.frame_layout, other.index_order, other.dtype)


def read_group(grid: Grid, steps: int, target_bytes: int, *, one_band: bool = False
               ) -> tuple[int, int, int, int]:
    """Return the ``(time, band, y, x)`` shape of one read group.

    A read group is whole frames, as many as fit in ``target_bytes`` decoded,
    grown in the order that keeps the bytes one native call fetches in the
    fewest byte ranges: in a Rumi file the frames of a tile cell (every time
    step and band it holds) are adjacent and cells follow in row-major order.
    So: every band of a cell, then the scene's time steps (a divisor of them,
    so a group never needs two calls), then more scenes of a catalog, then
    tile columns up to the full width (a row of cells is one range), then rows
    of cells. Time comes before space in catalogs too: a reduction over time
    (mean, median, composite) then completes inside each chunk instead of
    combining one partial result per scene, which measured 2.5x faster for a
    time mean of 12 scenes (``benchmarks/results/latest-catalog-exp.md``) and
    is what ``median("time")`` needs. Scenes are added while a full row of
    cells of each still fits, so a scene's share of a group is one byte range
    and a full load costs a request per scene per group of rows, not one per
    scene.

    Parameters
    ----------
    grid : Grid
        Geometry of every scene.
    steps : int
        Time steps of the cube (scenes x steps per scene).
    target_bytes : int
        Decoded bytes to aim for; a group is never smaller than one frame.
    one_band : bool, default False
        The variable holds one band (``band_as_variable=True``).

    Returns
    -------
    tuple of int
    """
    itemsize = grid.dtype.itemsize
    ft, fb = grid.time_frame, 1 if one_band else grid.band_frame
    bands = 1 if one_band else grid.bands
    size = [ft, fb, min(grid.tile_height, grid.height), min(grid.tile_width, grid.width)]

    def fits(t: int, b: int, y: int, x: int) -> bool:
        return t * b * y * x * itemsize <= target_bytes

    # Bands: any multiple of the frame's bands.
    size[1] = _grow(fb, bands, lambda n: fits(size[0], n, size[2], size[3]))
    # Time within a scene: multiples of the frame's steps that divide its steps.
    per_scene = grid.time_count
    within = [n for n in range(ft, per_scene + 1, ft) if per_scene % n == 0 and n <= steps]
    fitting = [n for n in within if fits(n, size[1], size[2], size[3])]
    size[0] = max(fitting, default=ft)
    # More scenes of a catalog, once every step of one scene is in, while a full
    # row of cells of each still fits: a scene's share of a group stays one byte
    # range, so a full load costs a request per file per group of rows.
    if size[0] == per_scene:
        # The largest multiple of a scene's steps that fits (computed, not searched: a
        # catalog of a million scenes would otherwise try every count).
        per_step = size[1] * size[2] * grid.width * itemsize
        most = min(steps, target_bytes // per_step) // per_scene * per_scene
        if most >= 2 * per_scene:
            size[0] = most
    # Columns of cells up to the full width, then rows of cells.
    size[3] = _grow(grid.tile_width, grid.width, lambda n: fits(size[0], size[1], size[2], n))
    if size[3] >= grid.width:
        size[2] = _grow(grid.tile_height, grid.height,
                        lambda n: fits(size[0], size[1], n, size[3]))
    return (min(size[0], steps), size[1], size[2], size[3])


def _grow(step: int, limit: int, fits: Any) -> int:
    """Return the largest multiple of ``step`` (capped at ``limit``) that fits."""
    if step >= limit:
        return limit
    n = max(1, math.floor(limit / step))
    best = step
    lo, hi = 1, n
    while lo <= hi:  # fits() is monotonic in the size
        mid = (lo + hi) // 2
        if fits(mid * step):
            best, lo = mid * step, mid + 1
        else:
            hi = mid - 1
    if best == n * step and limit % step and fits(limit):
        return limit
    return best


def chunk_starts(chunks: tuple[int, ...]) -> np.ndarray:
    """Return the offset of every block along one dimension."""
    return np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64)
