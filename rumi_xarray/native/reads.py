"""Reads through librumi: metadata, windows into numpy buffers, byte plans.

Everything else in the package describes *what* to read (scenes, windows,
time and band lists, calls); this module turns that into librumi
calls (``rumi``'s Python API for metadata, its C API through
:mod:`rumi_xarray.native.binding` for reads into our buffers and byte plans),
adds the context librumi's messages lack (which file, which selection, which
catalog row) as :class:`~rumi_xarray.errors.RumiError` subclasses, and counts
what was read.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import rumi

from rumi_xarray.errors import (
    RumiChecksumError,
    RumiError,
    RumiFileChangedError,
    RumiFileNotFoundError,
    RumiFormatError,
    os_error,
    with_context,
)
from rumi_xarray.model.costs import Explanation, overview_lines
from rumi_xarray.model.cube import Cube, Scene, source_name
from rumi_xarray.model.planning import Call
from rumi_xarray.native import binding, process
from rumi_xarray.native.stats import STATS
from rumi_xarray.sources.location import locate
from rumi_xarray.sources.transport import RangeSource

#: Axis order of :func:`reference_read`: dimensions never depend on T.
PATTERN = "t b y x"

#: librumi's exception types (what it raises for bad input, I/O, decoding).
#: Decoded bytes from which :func:`read` lets librumi allocate the result.
LIBRUMI_ALLOCATES = 256 * 2**20

NATIVE_ERRORS = (ValueError, OSError, RuntimeError, MemoryError, NotImplementedError)

#: One item of a native call: a scene and its window's top-left ``(row, col)``
#: (every item of a call shares the window size).
CallItem = tuple[Scene, int, int]


# --- metadata -------------------------------------------------------------------


def info(source: Any, header: bytes | None = None, *, opaque: bool = False) -> Any:
    """Read a source's metadata (index, georeferencing, labels).

    Parameters
    ----------
    source : str, bytes or RangeSource
        Path, URL, file content or range-read source.
    header : bytes, optional
        When given, librumi checks that it indexes ``source``.
    opaque : bool, default False
        ``source`` was reached through a catalog: errors say what failed
        without librumi's message (which may quote the file's first bytes).

    Returns
    -------
    rumi.Metadata

    Raises
    ------
    RumiFormatError
        Not a Rumi file, or ``header`` belongs to another file.
    RumiIOError
        The source cannot be read.
    """
    name = source_name(source)
    if locate(source).local and not os.path.exists(source):
        raise os_error(RumiFileNotFoundError, errno.ENOENT, f"{name}: no such file", name)
    try:
        meta = _info(source, header)
    except OverflowError as exc:
        # rumi's Python side decodes the trailer's times: a damaged one can overflow there.
        raise RumiFormatError(f"{name}: not a readable Rumi file (its labels cannot be "
                              f"decoded: {exc})") from exc
    except NATIVE_ERRORS as exc:
        cause = None if opaque else exc
        if header is not None and "does not match" in str(exc):
            raise RumiFormatError(
                f"{name}: the header given does not index this file (it belongs to "
                f"another file or was altered)") from cause
        if _not_found(exc):
            raise with_context(exc, f"{name}: no such file or object", source=name,
                               kind=RumiFileNotFoundError, opaque=opaque) from cause
        if opaque:
            raise with_context(exc, name, source=name,
                               kind=RumiFormatError if isinstance(exc, ValueError) else None,
                               opaque=True) from None
        hint = _not_rumi_hint(source, exc)
        raise with_context(exc, f"{name}: not a readable Rumi file{hint}", source=name) from exc
    STATS.add(metadata=1)
    return meta


def _not_found(exc: BaseException) -> bool:
    """Return whether librumi's transport was told the object does not exist."""
    text = str(exc)
    return isinstance(exc, FileNotFoundError) or (
        isinstance(exc, OSError) and ("HTTP 404" in text or "NoSuchKey" in text
                                      or "NoSuchBucket" in text))


def _not_rumi_hint(source: Any, exc: BaseException) -> str:
    """Suggest ``convert`` when a local file is a GeoTIFF, netCDF or Zarr store."""
    if not locate(source).local or isinstance(exc, OSError):
        return ""
    try:
        with open(source, "rb") as f:
            magic = f.read(8)
    except OSError:
        return ""
    kinds = {b"II*\x00": "a TIFF", b"MM\x00*": "a TIFF", b"II+\x00": "a BigTIFF",
             b"MM\x00+": "a BigTIFF", b"CDF\x01": "a netCDF", b"CDF\x02": "a netCDF",
             b"\x89HDF": "a netCDF-4/HDF5"}
    kind = kinds.get(magic[:4])
    if kind is None:
        return ""
    return (f" (it is {kind} file; convert it first: rumi-xarray convert "
            f"{os.path.basename(source)} out.rumi)")


def _info(source: Any, header: bytes | None) -> Any:
    if not isinstance(source, RangeSource):
        return rumi.info(source=source, header=header)
    failure: ValueError | None = None
    for image in source.metadata_images():
        try:
            return rumi.info(source=image, header=header)
        except ValueError as exc:
            if "does not match" in str(exc):
                raise
            failure = exc  # the trailer may lie beyond this probe: try a larger one
    assert failure is not None
    raise failure


def header_info(header: bytes) -> Any:
    """Parse a header alone: geometry, dtype and frame layout, no labels.

    Parameters
    ----------
    header : bytes
        External header bytes.

    Returns
    -------
    rumi.Metadata
    """
    return rumi.info(header=header)


def stamp(source: Any) -> tuple[int, int, int] | None:
    """Return ``(size, mtime_ns, inode)`` of a local file, to notice later rewrites.

    The inode catches an atomic replacement (``to_rumi`` writes a new file and
    renames it) within the file system's timestamp granularity.

    Parameters
    ----------
    source : str or other source

    Returns
    -------
    tuple of int or None
        ``None`` for anything but a local path.
    """
    if not locate(source).local:
        return None
    st = os.stat(source)
    return (int(st.st_size), int(st.st_mtime_ns), int(st.st_ino))


# --- reads ----------------------------------------------------------------------


def read(windows: Sequence[CallItem], times: Sequence[int], bands: Sequence[int],
         height: int, width: int, dtype: np.dtype, frames: int = 0,
         out: np.ndarray | None = None) -> np.ndarray:
    """Read equal-sized windows from one or more scenes in ONE native call.

    librumi decodes straight into ``out`` when given, so a caller that owns
    the final array pays no copy. Otherwise the result is a new numpy buffer,
    or, from :data:`LIBRUMI_ALLOCATES` bytes up (whole loads, larger than
    any default dask chunk), librumi's own allocation through the public
    ``rumi.read_many``, as ``rumi.read`` returns it: measured on the
    benchmark machine (``benchmarks/sparse_reads.py --workloads full``), a
    fresh numpy buffer of a 384 MiB load made the read 1.6x the engine after
    a pause of a few seconds and a time mean over it 1.7x, where librumi's
    stayed at 1.0x; for chunk-sized buffers numpy's was the faster
    (0.25 s against 0.37 s for the four 96 MiB chunks of that cube).

    Parameters
    ----------
    windows : sequence of (Scene, row, col)
        Scene and top-left corner of each window. One window is a
        ``rumi_read``, more a ``rumi_read_many`` (one plan, one transport
        submission).
    times, bands : sequence of int
        Time steps and bands within each scene.
    height, width : int
        Window size shared by every item.
    dtype : numpy.dtype
        The scenes' sample type.
    frames : int, optional
        Frames the whole call touches, for :func:`rumi_xarray.stats` only.
    out : numpy.ndarray, optional
        C-contiguous destination shaped like the result.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_windows, n_times, n_bands, height, width)``.
    """
    process.configure()
    time_arg, band_arg = [int(t) for t in times], [int(b) for b in bands]
    process.require_verification(lambda: _where(windows, time_arg, band_arg, height, width))
    shape = (len(windows), len(time_arg), len(band_arg), height, width)
    if out is not None and (out.shape != shape or out.dtype != dtype):
        raise ValueError(f"read: destination is {out.shape} {out.dtype}, needs {shape} {dtype}")
    _refuse_rewritten(windows, time_arg, band_arg, height, width)
    try:
        native = _materialize(windows, time_arg, band_arg, height, width)
        items = [(s.source, s.header, r, c) for s, r, c in native]
        big = math.prod(shape) * dtype.itemsize >= LIBRUMI_ALLOCATES
        if out is None and big and _librumi_arrays_writeable is not False:
            out = _librumi_read(items, time_arg, band_arg, height, width, shape, dtype)
        elif out is None:
            out = np.empty(shape, dtype=dtype)
            binding.read_into(out, items, time_arg, band_arg, height, width)
        else:
            binding.read_into(out, items, time_arg, band_arg, height, width)
    except NATIVE_ERRORS as exc:
        failure = _locate_failure(exc, windows, time_arg, band_arg, height, width, dtype)
        raise failure from (None if _opaque(failure) else exc)
    STATS.add(calls=1, items=len(windows), planned_frames=frames, bytes=int(out.nbytes))
    return out


def read_as(windows: Sequence[CallItem], times: Sequence[int], bands: Sequence[int],
            height: int, width: int, dtype: np.dtype, framework: str, frames: int = 0,
            pattern: str = "n t b y x") -> Any:
    """Read equal windows in ONE ``rumi.read_many`` call, into librumi's own allocation.

    The result is the array librumi allocated, handed to ``framework``
    through DLPack without a copy (``"torch"``, ``"jax"``, ``"tensorflow"``,
    ``"numpy"`` or ``"dlpack"``), as ``rumi.read_many(framework=...)``
    returns it.

    Parameters
    ----------
    windows : sequence of (Scene, row, col)
    times, bands : sequence of int
    height, width : int
    dtype : numpy.dtype
        The scenes' sample type.
    framework : str
    frames : int, optional
        Frames the call touches, for :func:`rumi_xarray.stats` only.
    pattern : str, default "n t b y x"
        librumi's output pattern (``"n b y x"`` for one time step).

    Returns
    -------
    array of ``framework``
        Shaped by ``pattern``.
    """
    process.configure()
    time_arg, band_arg = [int(t) for t in times], [int(b) for b in bands]
    _refuse_rewritten(windows, time_arg, band_arg, height, width)
    try:
        native = _materialize(windows, time_arg, band_arg, height, width)
        out = rumi.read_many([s.source for s, _, _ in native], [s.header for s, _, _ in native],
                             windows=[(r, c, height, width) for _, r, c in native],
                             time=time_arg, bands=band_arg, pattern=pattern,
                             framework=framework)
    except NATIVE_ERRORS as exc:
        failure = _locate_failure(exc, windows, time_arg, band_arg, height, width, dtype)
        raise failure from (None if _opaque(failure) else exc)
    nbytes = len(windows) * len(time_arg) * len(band_arg) * height * width * dtype.itemsize
    STATS.add(calls=1, items=len(windows), planned_frames=frames, bytes=int(nbytes))
    return out


def run_as(cube: Cube, call: Call, framework: str, pattern: str = "n t b y x") -> Any:
    """Run one call into librumi's allocation, handed to ``framework``.

    Parameters
    ----------
    cube : Cube
    call : Call
    framework : str
    pattern : str, default "n t b y x"

    Returns
    -------
    array of ``framework``
        Shaped by ``pattern``.
    """
    windows = [(cube.scenes[s], r, c) for s, r, c in zip(call.scenes, call.rows, call.cols,
                                                         strict=True)]
    return read_as(windows, call.times, call.bands, call.height, call.width, cube.grid.dtype,
                   framework, frames=call.frames(cube), pattern=pattern)


#: Frameworks librumi hands its arrays to (``rumi.read(framework=...)``).
FRAMEWORKS = ("numpy", "dlpack", "torch", "jax", "tensorflow")


def adopt(array: np.ndarray, framework: str) -> Any:
    """Hand a numpy buffer to ``framework`` through DLPack, without a copy.

    For batches assembled from several native calls (chips of several dates,
    clipped chips), the counterpart of librumi's ``framework=`` (which has no
    public function for a numpy buffer): the framework the caller named is
    imported here, when asked for, and only here outside ``rumi_xarray.torch``
    (``tests/test_architecture.py`` lists this module as its owner).

    Parameters
    ----------
    array : numpy.ndarray
    framework : {"numpy", "dlpack", "torch", "jax", "tensorflow"}

    Returns
    -------
    array of ``framework``
    """
    if framework in ("numpy", "dlpack"):
        return array
    if framework == "torch":
        import torch

        return torch.from_dlpack(array)
    if framework == "jax":
        import jax.dlpack

        return jax.dlpack.from_dlpack(array)
    if framework == "tensorflow":
        import tensorflow as tf

        # TensorFlow's from_dlpack takes a capsule, not an object with __dlpack__
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    raise ValueError(f"framework must be one of {FRAMEWORKS}, got {framework!r}")


def run(cube: Cube, call: Call, out: np.ndarray | None = None) -> np.ndarray:
    """Run one call (:class:`~rumi_xarray.model.planning.Call`) into numpy.

    Parameters
    ----------
    cube : Cube
    call : Call
    out : numpy.ndarray, optional
        Contiguous ``(n_items, n_times, n_bands, height, width)`` destination.

    Returns
    -------
    numpy.ndarray
        ``(n_items, n_times, n_bands, height, width)``.
    """
    windows = [(cube.scenes[s], r, c) for s, r, c in zip(call.scenes, call.rows, call.cols,
                                                         strict=True)]
    return read(windows, call.times, call.bands, call.height, call.width, cube.grid.dtype,
                frames=call.frames(cube), out=out)


def reference_read(scene: Scene) -> np.ndarray:
    """Return a whole file through librumi's own Python API (``rumi.read``).

    The ground truth the demo checks rumi_xarray's reads against: a
    different path through librumi than :func:`read`'s buffer reads.

    Parameters
    ----------
    scene : Scene

    Returns
    -------
    numpy.ndarray
        ``(time, band, y, x)``.
    """
    process.configure()
    process.require_verification(lambda: (f"{scene.describe()}: reading the whole file",
                                          scene.name))
    return rumi.read(scene.source, scene.header, pattern=PATTERN)


def _where(windows: Sequence[CallItem], times: list[int], bands: list[int], height: int,
           width: int) -> tuple[str, str | None]:
    """Return the file(s) and selection of a read, and its first source, for errors."""
    scenes = list({id(s): s for s, _, _ in windows}.values())
    names = ", ".join(s.describe() for s in scenes[:3])
    if len(scenes) > 3:
        names += f" and {len(scenes) - 3} more"
    selection = selection_text(times, bands, height, width, [(r, c) for _, r, c in windows])
    return f"{names}: reading {selection}", scenes[0].name


def _materialize(windows: Sequence[CallItem], times: list[int] | None, bands: list[int] | None,
                 height: int, width: int) -> Sequence[CallItem]:
    """Replace range-read sources by sparse images holding the planned frames."""
    ranged: dict[int, list[int]] = {}
    for i, (scene, _, _) in enumerate(windows):
        if isinstance(scene.source, RangeSource):
            ranged.setdefault(id(scene), []).append(i)
    if not ranged:
        return windows
    out = list(windows)
    for indices in ranged.values():
        scene = windows[indices[0]][0]
        ranges = [r for i in indices
                  for r in plan_ranges(scene, times, bands, windows[i][1], windows[i][2],
                                       height, width)]
        local = Scene(scene.source.image(ranges), scene.header, scene.catalog_row,
                      overview=scene.overview)
        for i in indices:
            out[i] = (local, windows[i][1], windows[i][2])
    return out


def selection_text(times: Sequence[int] | None, bands: Sequence[int] | None,
                   height: int, width: int, corners: Sequence[tuple[int, int]]) -> str:
    """Return a selection as text for error messages.

    Parameters
    ----------
    times, bands : sequence of int or None
    height, width : int
    corners : sequence of (row, col)

    Returns
    -------
    str
    """
    shown = ", ".join(f"({r}, {c}, {height}, {width})" for r, c in corners[:4])
    if len(corners) > 4:
        shown += f", ... {len(corners)} windows"
    return f"time={_short(times)}, bands={_short(bands)}, window(s)=[{shown}]"


def _short(values: Sequence[int] | None) -> str:
    if values is None:
        return "all"
    values = list(values)
    if len(values) > 8:
        return f"[{values[0]}, {values[1]}, ... {values[-1]}] ({len(values)})"
    return str(values)


def _locate_failure(exc: BaseException, windows: Sequence[CallItem], times: list[int],
                    bands: list[int], height: int, width: int, dtype: np.dtype
                    ) -> RumiError:
    """Name the scene that made a read fail, and notice files rewritten since open.

    librumi reports the cause but not which item of a ``read_many`` caused it,
    so on failure (never on the fast path) each scene is read again alone to
    find the first culprit.
    """
    culprit: CallItem | None = windows[0] if len(windows) == 1 else None
    if culprit is None:
        probe = np.empty((1, len(times), len(bands), height, width), dtype=dtype)
        for window in windows:
            try:
                scene, r, c = _materialize([window], times, bands, height, width)[0]
                binding.read_into(probe, [(scene.source, scene.header, r, c)], times, bands,
                                  height, width)
            except Exception:
                culprit = window
                break
    if culprit is None:
        selection = selection_text(times, bands, height, width,
                                   [(r, c) for _, r, c in windows])
        names = ", ".join(s.describe() for s, _, _ in windows[:3])
        return with_context(exc, f"reading {len(windows)} windows from {names}: {selection}",
                            selection=selection)
    scene, r, c = culprit
    selection = selection_text(times, bands, height, width, [(r, c)])
    context = f"{scene.describe()}: reading {selection}"
    changed = _changed(scene)
    if changed:
        return with_context(exc, _changed_text(scene, changed), source=scene.name,
                            selection=selection, row=scene.catalog_row,
                            kind=RumiFileChangedError)
    # A scene reached through a catalog is not one the caller named: its error says what
    # failed, not what librumi saw in the bytes (which may be any file's first bytes).
    return with_context(exc, context, source=scene.name, selection=selection,
                        row=scene.catalog_row,
                        kind=_checksum_kind(exc) or _missing_kind(scene.source, exc),
                        opaque=scene.catalog_row is not None)


def _missing_kind(source: Any, exc: BaseException) -> type[RumiError] | None:
    """Return :class:`RumiFileNotFoundError` when the source does not exist (else None).

    librumi reports a missing file in a ``read_many`` as a plain I/O failure;
    every door (chips, lazy and dask reads) raises the documented type for it.
    """
    if _not_found(exc):
        return RumiFileNotFoundError
    if isinstance(source, str) and locate(source).local and not os.path.exists(source):
        return RumiFileNotFoundError
    return None


def _opaque(failure: RumiError) -> bool:
    """Return whether a read error is about a catalog's scene (its cause is not shown)."""
    return failure.row is not None


def _checksum_kind(exc: BaseException) -> type[RumiError] | None:
    """Return :class:`RumiChecksumError` when librumi reports a checksum mismatch.

    librumi reports every decoding failure as one status (an ``OSError``); only
    its OpenZL message tells a failed checksum (bits changed after writing)
    from other damage.
    """
    if isinstance(exc, OSError) and "checksum mismatch" in str(exc).lower():
        return RumiChecksumError
    return None


#: Whether librumi's arrays arrive writeable: numpy before 2.1 imports DLPack
#: capsules read-only, and users modify loaded values in place. None until seen.
_librumi_arrays_writeable: bool | None = None


def _librumi_read(items: list[tuple[Any, bytes, int, int]], times: list[int],
                  bands: list[int], height: int, width: int, shape: tuple[int, ...],
                  dtype: np.dtype) -> np.ndarray:
    """Read into an array librumi allocates (public ``rumi.read_many``).

    Where the installed numpy makes it read-only, copy it once and let later
    reads decode into numpy buffers instead.
    """
    global _librumi_arrays_writeable
    out = rumi.read_many([i[0] for i in items], [i[1] for i in items],
                         windows=[(r, c, height, width) for _, _, r, c in items],
                         time=times, bands=bands, pattern="n t b y x")
    if out.shape != shape or out.dtype != dtype:
        raise RuntimeError(f"librumi returned {out.shape} {out.dtype} for a read of "
                           f"{shape} {dtype}")
    _librumi_arrays_writeable = bool(out.flags.writeable)
    return out if out.flags.writeable else out.copy()


def _refuse_rewritten(windows: Sequence[CallItem], times: list[int], bands: list[int],
                      height: int, width: int) -> None:
    """Raise before decoding when a local file was rewritten since it was opened.

    A rewrite does not always make decoding fail (a file of the same layout
    decodes into other numbers), so every read compares each local file's
    size, modification time and inode with those seen at open: one ``stat``
    per file.
    """
    checked: set[int] = set()
    for scene, _, _ in windows:
        if scene.stamp is None or id(scene) in checked:
            continue
        checked.add(id(scene))
        changed = _changed(scene)
        if changed:
            selection = selection_text(times, bands, height, width,
                                       [(r, c) for s, r, c in windows if s is scene])
            error = os_error(RumiFileChangedError, errno.ESTALE,
                             _changed_text(scene, changed), filename=scene.name)
            error.source, error.selection, error.row = (scene.name, selection,
                                                        scene.catalog_row)
            raise error


def _changed_text(scene: Scene, changed: str) -> str:
    return f"{scene.describe()}: the file changed since it was opened ({changed}); open it again"


def _changed(scene: Scene) -> str:
    """Return how a local file differs from when its scene was opened ('' if not)."""
    if scene.stamp is None:
        return ""
    try:
        now = stamp(scene.source)
    except OSError:
        return "it is gone"
    if now is None or now == scene.stamp:
        return ""
    if now[0] != scene.stamp[0]:
        return f"its size went from {scene.stamp[0]} to {now[0]} bytes"
    if now[2] != scene.stamp[2]:
        return "it was replaced by another file of the same size"
    return "it was modified"


# --- byte planning (librumi's C API the Python API does not expose) -------------


def plan_ranges(scene: Scene, times: Sequence[int] | None, bands: Sequence[int] | None,
                row: int, col: int, height: int, width: int) -> list[tuple[int, int]]:
    """Return the compressed byte ranges a window read would fetch.

    Parameters
    ----------
    scene : Scene
        Scene whose header indexes the frames.
    times, bands : sequence of int or None
        Selection within the scene; ``None`` means all.
    row, col, height, width : int
        The window.

    Returns
    -------
    list of (offset, length)
        One range per frame, as librumi plans them; no I/O happens.
    """
    return binding.plan_ranges(scene.header, times, bands, row, col, height, width)


def explain_calls(calls: Iterable[tuple[Cube, Call]], tables: tuple[str, ...] = ()
                  ) -> Explanation:
    """Return what running these calls costs, from librumi's byte plans (no I/O).

    The one way every ``explain`` (lazy and dask-backed objects, chips,
    torch batches) counts: each call, its items and decoded bytes, and per
    item the frames and compressed byte ranges librumi plans.

    Parameters
    ----------
    calls : iterable of (Cube, Call)
        Each call with the cube whose scenes it indexes.
    tables : tuple of str
        What opening read from catalog tables on disk (said as it is).

    Returns
    -------
    Explanation
    """
    n_calls = items = frames = compressed = decoded = nranges = 0
    cubes: dict[int, Cube] = {}
    for cube, call in calls:
        cubes.setdefault(id(cube), cube)
        n_calls += 1
        items += len(call.scenes)
        decoded += call.nbytes(cube.grid.dtype.itemsize)
        for s, r, c in zip(call.scenes, call.rows, call.cols, strict=True):
            ranges = plan_ranges(cube.scenes[s], call.times, call.bands, r, c, call.height,
                                 call.width)
            frames += len(ranges)
            nranges += len(ranges)
            compressed += sum(length for _, length in ranges)
    return Explanation(calls=n_calls, items=items, frames=frames, compressed_bytes=compressed,
                       decoded_bytes=decoded, ranges=nranges, tables=tables,
                       overviews=overview_lines(cubes.values()))
