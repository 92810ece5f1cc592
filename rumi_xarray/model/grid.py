"""Frame grid of a Rumi raster: tile geometry and frame shape.

Pure geometry: no I/O, no librumi, no dask. A Rumi file stores its samples as
frames on a square tile grid; the frames of one tile cell (every time step and
band it holds) are stored next to each other, cells in row-major order. Which
blocks of whole frames one native call reads (the *read groups*, the chunks
rumi_xarray prefers for dask) is chunk policy, decided from this geometry in
:mod:`rumi_xarray.dask.chunks`.
"""

from __future__ import annotations

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

    @property
    def layout_key(self) -> tuple[Any, ...]:
        """What scenes must share to be read by one ``read_many`` call (hashable)."""
        return (self.time_count, self.bands, self.tile_height, self.tile_width,
                self.frame_layout, self.index_order, self.dtype.str)

    @property
    def stack_key(self) -> tuple[Any, ...]:
        """What scenes stacked along time in one cube share (hashable).

        Size, tile size, bands and dtype. Their number of time steps and frame
        layout may differ: such a cube is ragged (``Cube.ragged``) and each
        native call reads scenes of one :attr:`layout_key`.
        """
        return (self.height, self.width, self.bands, self.tile_height, self.tile_width,
                self.dtype.str)

    def same_layout(self, other: Grid) -> bool:
        """Return whether two scenes can be read by one ``read_many`` call."""
        return self.layout_key == other.layout_key
