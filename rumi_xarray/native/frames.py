"""Frame geometry and compression: which samples each frame holds, geozl per frame.

rumi's frame table gives each frame's position and axis order; these helpers
find a frame's source block in a ``(time, band, y, x)`` array and compress it
with one geozl graph per thread and frame shape.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import rumi

from rumi_xarray.errors import RumiWriteTypeError, input_error

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

    The table holds at most four shared placeholder frames, so it costs no
    more than a few frames of memory whatever the raster size; only its
    geometry is used.

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
    table = _placeholder_table(shape, dtype, pattern, tile_size)
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


def _placeholder_table(shape: tuple[int, int, int, int], dtype: np.dtype, pattern: str,
                       tile_size: int) -> Any:
    """Return a ``rumi.FrameTable`` of zero-stride frames for an image of ``shape``.

    ``rumi.frames`` would make every frame of a placeholder contiguous, i.e.
    allocate the whole image. Instead, the frame order (which of grid row,
    grid column, time and band the index walks, outermost first) is read off
    ``rumi.frames`` on a 2 x 2 probe, and the table is built from one zero
    frame per distinct frame shape (interior, right and bottom edges,
    corner), shared by every frame of that shape. rumi computes each frame's
    position itself and checks every shape against its own geometry, so an
    order inferred wrongly raises instead of mislabelling frames.
    """
    t, b, height, width = shape
    probe = rumi.frames(np.zeros((min(t, 2), min(b, 2), 2, 2), dtype=np.uint8), pattern,
                        tile_size=1)
    axes = probe.layout.split()
    walks = _walk_order(probe)
    extent = {"row": -(-height // tile_size), "col": -(-width // tile_size),
              "time": t, "band": b}
    cache: dict[tuple[int, ...], np.ndarray] = {}
    data = []
    for position in itertools.product(*(range(extent[w]) for w in walks)):
        at = dict(zip(walks, position, strict=True))
        row, col = at.get("row", 0), at.get("col", 0)
        dims = {"t": t, "b": b, "h": min(tile_size, height - row * tile_size),
                "w": min(tile_size, width - col * tile_size)}
        frame_shape = tuple(dims[a] for a in axes)
        if frame_shape not in cache:
            # Contiguous (rumi validates bool samples through the buffer);
            # calloc'd, so untouched pages cost no memory.
            cache[frame_shape] = np.zeros(frame_shape, dtype=dtype)
        data.append(cache[frame_shape])
    return rumi.FrameTable(data, image_width=width, image_length=height, tile_size=tile_size,
                           bands=b, dtype=dtype, pattern=pattern, time_count=t)


def _walk_order(probe: Any) -> list[str]:
    """Return the axes a probe table's index walks, outermost first.

    In a nested walk the innermost axis changes at the second frame, the next
    one after the inner axis is exhausted, and so on: sorting the axes by the
    first frame at which each changes orders them. Axes a frame holds, and
    axes that never change (a single step), are not walked.
    """
    frames = list(probe)
    first = frames[0]
    held = {"time": "t", "band": "b"}
    layout = probe.layout.split()
    changes: dict[str, int] = {}
    for name in ("row", "col", "time", "band"):
        if held.get(name) in layout:
            continue
        try:
            start = getattr(first, name)
        except AttributeError:  # frames hold every step of this axis
            continue
        change = next((k for k, f in enumerate(frames) if getattr(f, name) != start), None)
        if change is not None:
            changes[name] = change
    return sorted(changes, key=changes.__getitem__, reverse=True)


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

    def check(self, dtype: np.dtype, where: str) -> None:
        """Raise ``ValueError`` naming the codec unless geozl knows it.

        Called before anything is written, so a misspelt recipe never falls
        back silently to the generic graph.

        Parameters
        ----------
        dtype : numpy.dtype
            The samples to compress.
        where : str
            Named in the error (the destination).
        """
        import geozl

        sample = _storable(np.zeros((2, 2), dtype=dtype))
        try:
            if self.lossy:
                geozl.graph(sample if sample.dtype.kind == "f" else sample.astype(np.float32),
                            self.codec, error=self.error)
            else:
                geozl.graph(sample, self.codec)
        except RuntimeError as exc:
            if _unknown_method(exc):
                raise ValueError(f"{where}: unknown codec {self.codec!r} (geozl says: "
                                 f"{' '.join(str(exc).split())}); nothing was written") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: codec {self.codec!r} with error={self.error!r} "
                             f"is not valid: {exc}; nothing was written") from exc

    @property
    def lossy(self) -> bool:
        """Return whether frames are compressed within an error bound."""
        return self.error is not None and not (
            isinstance(self.error, (int, float)) and self.error == 0)

    def __call__(self, block: np.ndarray) -> bytes:
        """Compress one frame and return its payload."""
        # Imported here: geozl loads openzl, whose nanobind bindings print
        # leak reports at interpreter exit in every process that imported it.
        import geozl

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
            except RuntimeError as exc:
                if _unknown_method(exc):
                    raise ValueError(f"unknown codec {self.codec!r}: {exc}") from exc
                # Lossless recipes that need a wider or signed domain do not
                # apply to every dtype (bool, complex...); fall back to the
                # generic numeric graph, which takes any width.
                graph = geozl.graph(arr, "id>zstd")
            graphs[key] = graph
        return geozl.compress(arr, graph=graph)


def _unknown_method(exc: BaseException) -> bool:
    """Return whether geozl refused a recipe it does not know (ZL error code 21)."""
    return "unknown method" in str(exc)


def _storable(block: np.ndarray) -> np.ndarray:
    """Return a native-byte-order, aligned, C-contiguous array of a width geozl accepts.

    OpenZL wraps only aligned samples as a numeric stream: an array whose
    buffer is not aligned to its item size (a view at an odd offset of a byte
    buffer, such as one dask.distributed deserialized from a message) makes
    ``geozl.compress`` fail with "could not wrap src as a numeric stream (ZL
    error code 70)", so such a block is copied. Big-endian input is
    byte-swapped (the values are unchanged). complex128 samples are 16 bytes,
    wider than any OpenZL numeric stream, so they are compressed as pairs of
    float64; the frame's bytes, which is what Rumi stores and decodes, are the
    same.
    """
    arr = np.require(block, requirements=["C_CONTIGUOUS", "ALIGNED"])
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype == np.complex128:
        arr = arr.view(np.float64)
    return arr


def check_dtype(target: str, dtype: np.dtype) -> np.dtype:
    """Return the native-order dtype to store, or raise if Rumi cannot store it."""
    native = dtype.newbyteorder("=") if not dtype.isnative else dtype
    if native not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise input_error(RumiWriteTypeError,
                          f"{target}: Rumi cannot store samples of dtype {dtype} (supported: "
                          f"{names}); cast the data first (e.g. .astype('float32'))", target)
    return native


def frame_axes(pattern: str, tile_size: int) -> frozenset[str]:
    """Return the axes (``"t"``, ``"b"``) one frame of ``pattern`` holds whole.

    librumi's layout of a probe array says it; the chunking rule that uses it
    is :func:`rumi_xarray.dask.chunks.write_chunks`.

    Parameters
    ----------
    pattern : str
        A rumi frame pattern over ``t b (row h) (col w)``.
    tile_size : int

    Returns
    -------
    frozenset of str
    """
    # Every axis longer than 1, so the layout shows which ones frames hold.
    probe = np.broadcast_to(np.zeros((), dtype=np.uint8), (2, 2, 1, 1))
    axes = rumi.frames(probe, pattern, tile_size=tile_size).layout.split()
    return frozenset(a for a in ("t", "b") if a in axes)
