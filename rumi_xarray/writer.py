"""Write Rumi files: compress frames with geozl, index them with rumi.

:func:`write_array` is the array-level core: a ``(time, band, y, x)`` numpy
or dask array plus labels in, a ``.rumi`` file and its header out. Dask input
is compressed frame by frame in parallel tasks, so the whole array is never
held in memory, only its compressed frames.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import geozl
import numpy as np
import rumi

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
    keeps its own, keyed by shape (edge frames are smaller).

    Parameters
    ----------
    codec : str
        geozl graph recipe, e.g. ``"planar>zigzag>zstd"``.
    error : int, float or str, optional
        geozl error bound (absolute number, ``"1%"`` relative, or a recipe);
        ``None`` is lossless.
    """

    def __init__(self, codec: str = DEFAULT_CODEC, error: Any = None) -> None:
        self.codec = codec
        self.error = error
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {"codec": self.codec, "error": self.error}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["codec"], state["error"])  # type: ignore[misc]

    def __call__(self, block: np.ndarray) -> bytes:
        """Compress one frame and return its payload."""
        graphs = getattr(self._local, "graphs", None)
        if graphs is None:
            graphs = self._local.graphs = {}
        arr = _storable(block)
        key = (arr.shape, arr.dtype.str)
        graph = graphs.get(key)
        if graph is None:
            try:
                graph = geozl.graph(arr, self.codec, error=self.error)
            except RuntimeError:
                # Lossless recipes that need a wider or signed domain do not
                # apply to every dtype (bool, complex...); fall back to the
                # generic numeric graph, which takes any width.
                if self.error is not None:
                    raise
                graph = geozl.graph(arr, "id>zstd")
            graphs[key] = graph
        return geozl.compress(arr, graph=graph)


def _storable(block: np.ndarray) -> np.ndarray:
    """Return a native-byte-order, C-contiguous view geozl accepts."""
    arr = np.ascontiguousarray(block)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
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
        Local output path. Nothing is left behind on failure.
    data : numpy.ndarray or dask.array.Array
        Four axes ``(time, band, y, x)``. A dask array is compressed frame by
        frame in dask tasks and never materialised whole.
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
    if data.ndim != 4:
        raise ValueError(f"{path}: write_array takes (time, band, y, x), got {data.ndim} axes")
    if pattern is None:
        if frame not in PATTERNS:
            raise ValueError(f"frame must be one of {sorted(PATTERNS)}, got {frame!r}")
        pattern = PATTERNS[frame]
    dtype = np.dtype(data.dtype)
    if not dtype.isnative:
        dtype = dtype.newbyteorder("=")
    table, specs = frame_specs(tuple(int(n) for n in data.shape), dtype, pattern, tile_size)
    compress = Compressor(codec, error)
    payloads = _compress_all(data, specs, compress, progress)
    table["compressed"] = payloads
    target = os.fspath(path)
    try:
        _, header = rumi.write(target, table, bands=list(bands), time=list(time),
                               transform=None if transform is None else tuple(transform),
                               crs=crs, pixel_is_point=pixel_is_point)
    except BaseException:
        if os.path.exists(target):
            os.remove(target)
        raise
    return bytes(header)


def _compress_all(data: Any, specs: list[FrameSpec], compress: Compressor,
                  progress: bool) -> list[bytes]:
    if isinstance(data, np.ndarray):
        return [compress(frame_block(data[s.time, s.band, s.rows, s.cols], s.axes))
                for s in specs]
    import dask
    from dask.delayed import delayed

    tasks = [delayed(_compress_frame)(data[s.time, s.band, s.rows, s.cols], s.axes, compress)
             for s in specs]
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return list(dask.compute(*tasks))
    return list(dask.compute(*tasks))


def _compress_frame(block: np.ndarray, axes: tuple[str, ...], compress: Compressor) -> bytes:
    return compress(frame_block(np.asarray(block), axes))
