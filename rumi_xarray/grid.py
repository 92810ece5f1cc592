"""Frame grid of a Rumi raster: tile geometry, frame shape, chunk alignment."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np


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
        Axes the frame index walks (``("t", "b")``, ``("b",)``, ``()``...).
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
        per_cell = (n_times if "t" in self.index_order else 1) * (
            n_bands if "b" in self.index_order else 1)
        return down * across * per_cell

    def same_layout(self, other: Grid) -> bool:
        """Return whether two scenes can share one ``read_many`` plan."""
        return (self.time_count, self.bands, self.tile_height, self.tile_width,
                self.frame_layout, self.index_order, self.dtype) == (
            other.time_count, other.bands, other.tile_height, other.tile_width,
                other.frame_layout, other.index_order, other.dtype)


def preferred_chunks(grid: Grid, dims: tuple[str, ...]) -> dict[str, int]:
    """Return the frame shape per dimension, xarray's ``preferred_chunks``.

    Parameters
    ----------
    grid : Grid
    dims : tuple of str
        Dimensions of the variable (some of ``time``, ``band``, ``y``, ``x``).

    Returns
    -------
    dict
    """
    frame = {"time": grid.time_frame, "band": grid.band_frame,
             "y": grid.tile_height, "x": grid.tile_width}
    return {dim: frame[dim] for dim in dims}


def align_chunks(chunks: Any, shape: tuple[int, ...], dims: tuple[str, ...],
                 preferred: dict[str, int], dtype: np.dtype,
                 source: str = "") -> tuple[tuple[int, ...], ...]:
    """Turn a user ``chunks`` request into frame-aligned dask chunks.

    ``{}`` (or a dimension left out) gives one frame per chunk. ``"auto"``
    (and ``-1``/``None`` inside a dict for "whole") give frame multiples:
    ``"auto"`` grows a chunk along ``time`` and ``band`` first, up to dask's
    ``array.chunk-size``, then square along ``y``/``x`` up to a quarter of
    it, because Earth observation work (pixel series, chips over all dates,
    time reductions) reads along time far more often than across a whole
    image, and a chip should not pull in a 100 MB chunk. Explicit
    sizes are kept but warn when they split frames (reads then decode the
    split frames once per chunk).

    Parameters
    ----------
    chunks : dict, int, str, tuple or None
        As accepted by ``xarray.open_dataset``.
    shape, dims : tuple
        Variable shape and dimension names.
    preferred : dict
        Frame shape per dimension.
    dtype : numpy.dtype
        For ``"auto"`` sizing.
    source : str
        Named in the warning.

    Returns
    -------
    tuple of tuple of int
        Normalized dask chunks.
    """
    from dask.array.core import normalize_chunks

    frame = tuple(preferred.get(d, n) for d, n in zip(dims, shape, strict=True))
    if isinstance(chunks, dict):
        request = tuple(chunks.get(d, frame[i]) for i, d in enumerate(dims))
    elif chunks is None:
        request = tuple(-1 for _ in dims)
    elif isinstance(chunks, (int, str)):
        request = tuple(chunks for _ in dims)
    else:
        request = tuple(chunks)
    if any(r == "auto" for r in request):
        request = _auto(request, shape, dims, frame, np.dtype(dtype).itemsize)
    normalized = normalize_chunks(request, shape, dtype=dtype, previous_chunks=frame)
    for dim, size, blocks in zip(dims, frame, normalized, strict=True):
        inner = blocks[:-1]
        if any(b % size for b in inner):
            warnings.warn(
                f"{source}: chunks {blocks[:3]}... along {dim!r} split frames of "
                f"{size}; reads decode each split frame once per chunk. Use "
                f"multiples of {size} (or chunks={{}}) for frame-aligned reads.",
                UserWarning, stacklevel=3)
    return normalized


def _auto(request: tuple[Any, ...], shape: tuple[int, ...], dims: tuple[str, ...],
          frame: tuple[int, ...], itemsize: int) -> tuple[Any, ...]:
    """Resolve ``"auto"`` entries: time and band first, then square in y/x."""
    import dask
    import dask.utils

    limit = dask.utils.parse_bytes(dask.config.get("array.chunk-size"))
    size = [shape[i] if r in (-1, None) else frame[i] if r == "auto" else int(r)
            for i, r in enumerate(request)]
    auto = [r == "auto" for r in request]

    def nbytes() -> int:
        return math.prod(size) * itemsize

    for name in ("time", "band"):
        if name in dims and auto[dims.index(name)]:
            i = dims.index(name)
            fit = max(1, limit // max(1, nbytes() // size[i]))
            size[i] = min(shape[i], max(frame[i], fit // frame[i] * frame[i]))
    spatial = [dims.index(d) for d in ("y", "x") if d in dims and auto[dims.index(d)]]
    limit //= 4
    while spatial:
        grown = False
        for i in spatial:
            if size[i] < shape[i]:
                before = size[i]
                size[i] = min(shape[i], size[i] + frame[i])
                if nbytes() > limit:
                    size[i] = before
                else:
                    grown = True
        if not grown:
            break
    return tuple(size)


def chunk_starts(chunks: tuple[int, ...]) -> np.ndarray:
    """Return the offset of every block along one dimension."""
    return np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64)
