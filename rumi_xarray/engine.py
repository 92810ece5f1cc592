"""The one place that talks to librumi.

Everything else in the package describes *what* to read (scenes, windows,
time and band lists); this module turns that into librumi calls (``rumi``'s
Python API for metadata, its C API through :mod:`rumi_xarray._capi` for
reads into our buffers and byte plans), adds the
context librumi's messages lack (which file, which selection, which catalog
row), keeps process-wide settings sane and counts what was read.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import rumi

from rumi_xarray import _capi, redact
from rumi_xarray.transport import RangeSource

#: Axis order of :func:`reference_read`: dimensions never depend on T.
PATTERN = "t b y x"


@dataclass(frozen=True)
class Scene:
    """One Rumi source and the header that indexes it.

    Everything here pickles cheaply, so scenes travel inside dask graphs.

    Parameters
    ----------
    source : str, bytes or RangeSource
        Local path, URL librumi's transport resolves, the file content, or a
        source read through fsspec byte ranges.
    header : bytes
        The external header (``rumi.info(...).header``).
    row : int, optional
        Catalog row the scene came from, named in error messages.
    """

    source: str | bytes | memoryview | RangeSource = field(repr=False)
    header: bytes = field(repr=False)
    row: int | None = None

    @property
    def name(self) -> str:
        """Return a printable, credential-free name for messages and reprs."""
        if isinstance(self.source, str):
            return redact.redact(self.source)
        if isinstance(self.source, RangeSource):
            return self.source.name
        return f"<{len(self.source)} bytes in memory>"

    def describe(self) -> str:
        """Return the name, with the catalog row when there is one."""
        if self.row is None:
            return self.name
        return f"{self.name} (catalog row {self.row})"

    def __repr__(self) -> str:
        return f"Scene({self.describe()})"


@dataclass(frozen=True)
class Item:
    """One window of one scene inside a (grouped) native read."""

    scene: Scene
    row: int
    col: int


# --- statistics -----------------------------------------------------------------


class ReadStats:
    """Process-wide counters of native reads, shared by all threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"calls": 0, "items": 0, "frames": 0, "bytes": 0, "metadata": 0}

    def add(self, **counts: int) -> None:
        """Add to the named counters."""
        with self._lock:
            for key, value in counts.items():
                self._counts[key] += value

    def snapshot(self) -> dict[str, int]:
        """Return a copy of the counters."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Set every counter to zero."""
        with self._lock:
            for key in self._counts:
                self._counts[key] = 0


STATS = ReadStats()


def stats(reset: bool = False) -> dict[str, int]:
    """Return what this process has read through librumi.

    Parameters
    ----------
    reset : bool, default False
        Zero the counters after taking the snapshot.

    Returns
    -------
    dict
        ``calls`` (native read calls: one per ``rumi.read``/``read_many``),
        ``items`` (windows across those calls), ``frames`` (frames those
        windows touch), ``bytes`` (decoded bytes returned) and ``metadata``
        (metadata look-ups that touched a source).
    """
    out = STATS.snapshot()
    if reset:
        STATS.reset()
    return out


# --- process-wide settings ------------------------------------------------------

_settings_lock = threading.Lock()
_configured_pid: int | None = None


def _dask_thread_count() -> int:
    """Return how many threads this process's dask workers run reads on."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        pass
    import dask

    configured = dask.config.get("num_workers", None)
    return max(1, int(configured or os.cpu_count() or 1))


def configure() -> None:
    """Apply rumi_xarray's process-wide defaults once per process.

    librumi pins its thread pool size and its checksum setting at first use,
    so they are chosen before the first read: checksums on unless the user set
    ``RUMI_VERIFY`` (see :func:`enable_verification`), and one rumi thread per
    dask worker thread unless the user set ``RUMI_NUM_THREADS`` or called
    ``rumi.set_num_threads``. Forked children (dask multiprocessing)
    configure themselves again.
    """
    global _configured_pid
    pid = os.getpid()
    if _configured_pid == pid:
        return
    with _settings_lock:
        if _configured_pid == pid:
            return
        enable_verification(required=False)
        if "RUMI_NUM_THREADS" not in os.environ and not _user_set_threads():
            # If the pool already exists its size is fixed; nothing to do.
            with contextlib.suppress(RuntimeError):
                rumi.set_num_threads(_dask_thread_count())
        _configured_pid = pid


def enable_verification(required: bool = True) -> bool:
    """Turn librumi's frame checksum verification on for this process.

    Without it, most single-bit corruptions come back as wrong numbers with no
    error; with it, they raise. rumi_xarray calls this at import, so it is on
    by default. An explicit ``RUMI_VERIFY`` in the environment is respected.

    Parameters
    ----------
    required : bool, default True
        Raise if verification cannot be turned on because librumi already
        pinned it off (a frame was decoded before, with ``RUMI_VERIFY=0`` or
        through plain ``rumi`` calls). With False, warn instead.

    Returns
    -------
    bool
        Whether verification is on.
    """
    if "RUMI_VERIFY" in os.environ and not required:
        return bool(rumi.get_checksum_verification())
    try:
        rumi.set_checksum_verification(True)
    except RuntimeError:
        if not rumi.get_checksum_verification():
            message = (
                "librumi's checksum verification is pinned off in this process (a frame "
                "was decoded before rumi_xarray could enable it, or RUMI_VERIFY=0); "
                "corrupted frames may then return wrong numbers silently. Import "
                "rumi_xarray before the first rumi read, or set RUMI_VERIFY=1.")
            if required:
                raise RuntimeError(message) from None
            if not _warned_verification:
                _warn_verification(message)
            return False
    return True


_warned_verification = False


def _warn_verification(message: str) -> None:
    global _warned_verification
    import warnings

    _warned_verification = True
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def _user_set_threads() -> bool:
    """Return whether someone already sized librumi's pool in this process.

    librumi cannot tell a default from a choice, so a size other than its
    default (one thread) is taken as the user's.
    """
    return rumi.get_num_threads() != 1


def verification() -> bool:
    """Return whether librumi verifies frame checksums in this process."""
    return bool(rumi.get_checksum_verification())


# --- error context --------------------------------------------------------------


def _rewrap(exc: BaseException, context: str) -> BaseException:
    """Return ``exc`` re-created with ``context`` prepended, same type."""
    message = redact.redact_text(str(exc))
    text = f"{context}: {message}"
    try:
        new = type(exc)(text)
    except Exception:  # an exception type with a custom constructor
        new = RuntimeError(text)
    return new


def _selection_text(times: Sequence[int] | None, bands: Sequence[int] | None,
                    height: int, width: int, items: Sequence[Item]) -> str:
    windows = ", ".join(f"({it.row}, {it.col}, {height}, {width})" for it in items[:4])
    if len(items) > 4:
        windows += f", ... {len(items)} windows"
    return (f"time={_short(times)}, bands={_short(bands)}, window(s)=[{windows}]")


def _short(values: Sequence[int] | None) -> str:
    if values is None:
        return "all"
    values = list(values)
    if len(values) > 8:
        return f"[{values[0]}, {values[1]}, ... {values[-1]}] ({len(values)})"
    return str(values)


# --- metadata -------------------------------------------------------------------


def info(source: str | bytes | RangeSource, header: bytes | None = None) -> rumi.Metadata:
    """Read a source's metadata (index, georeferencing, labels).

    Parameters
    ----------
    source : str or bytes
        Path, URL or file content.
    header : bytes, optional
        When given, librumi checks that it indexes ``source``.

    Returns
    -------
    rumi.Metadata

    Raises
    ------
    ValueError, OSError
        With the (redacted) source named in the message.
    """
    name = Scene(source, b"").name
    if isinstance(source, str) and "://" not in source and not os.path.exists(source):
        raise FileNotFoundError(f"{name}: no such file")
    try:
        meta = _info(source, header)
    except (ValueError, OSError, RuntimeError, MemoryError, NotImplementedError) as exc:
        reason = str(exc)
        if header is not None and "does not match" in reason:
            raise ValueError(
                f"{name}: the header given does not index this file "
                f"(it belongs to another file or was altered)") from exc
        raise _rewrap(exc, f"{name}: not a readable Rumi file") from exc
    STATS.add(metadata=1)
    return meta


def _info(source: str | bytes | RangeSource, header: bytes | None) -> rumi.Metadata:
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


def header_info(header: bytes) -> rumi.Metadata:
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


# --- reads ----------------------------------------------------------------------


def read(items: Sequence[Item], times: Sequence[int], bands: Sequence[int],
         height: int, width: int, dtype: np.dtype, frames: int = 0,
         out: np.ndarray | None = None) -> np.ndarray:
    """Read equal-sized windows from one or more scenes in ONE native call.

    librumi decodes straight into a numpy buffer (``out`` when given), so a
    caller that owns the final array pays no copy, and numpy's allocation
    (huge pages where available) is cheaper to fault in than librumi's own.

    Parameters
    ----------
    items : sequence of Item
        Scene and top-left corner of each window. One item is a
        ``rumi_read``, more a ``rumi_read_many`` (one plan, one transport
        submission).
    times, bands : sequence of int
        Time steps and bands within each scene.
    height, width : int
        Window size shared by every item.
    dtype : numpy.dtype
        The scenes' sample type.
    frames : int, optional
        Frames the whole call touches, for :func:`stats` only.
    out : numpy.ndarray, optional
        C-contiguous destination shaped like the result.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_items, n_times, n_bands, height, width)``.
    """
    configure()
    time_arg, band_arg = [int(t) for t in times], [int(b) for b in bands]
    shape = (len(items), len(time_arg), len(band_arg), height, width)
    if out is None:
        out = np.empty(shape, dtype=dtype)
    elif out.shape != shape or out.dtype != dtype:
        raise ValueError(f"read: destination is {out.shape} {out.dtype}, needs {shape} {dtype}")
    try:
        native = _materialize(items, time_arg, band_arg, height, width)
        _capi.read_into(out, [(it.scene.source, it.scene.header, it.row, it.col)
                              for it in native], time_arg, band_arg, height, width)
    except (ValueError, OSError, RuntimeError, MemoryError, NotImplementedError) as exc:
        raise _locate_failure(exc, items, time_arg, band_arg, height, width, dtype) from exc
    STATS.add(calls=1, items=len(items), frames=frames, bytes=int(out.nbytes))
    return out


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
    configure()
    return rumi.read(scene.source, scene.header, pattern=PATTERN)


def _materialize(items: Sequence[Item], times: list[int] | None, bands: list[int] | None,
                 height: int, width: int) -> Sequence[Item]:
    """Replace range-read sources by sparse images holding the planned frames."""
    ranged: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        if isinstance(it.scene.source, RangeSource):
            ranged.setdefault(id(it.scene), []).append(i)
    if not ranged:
        return items
    out = list(items)
    for indices in ranged.values():
        scene = items[indices[0]].scene
        assert isinstance(scene.source, RangeSource)
        ranges = [r for i in indices
                  for r in plan_ranges(scene, times, bands, items[i].row, items[i].col,
                                       height, width)]
        local = Scene(scene.source.image(ranges), scene.header, scene.row)
        for i in indices:
            out[i] = Item(local, items[i].row, items[i].col)
    return out


def _locate_failure(exc: BaseException, items: Sequence[Item], times: list[int],
                    bands: list[int], height: int, width: int, dtype: np.dtype
                    ) -> BaseException:
    """Name the scene that made a grouped read fail.

    librumi reports the cause but not which item of a ``read_many`` caused it,
    so on failure (never on the fast path) each scene is read again alone to
    find the first culprit.
    """
    culprit: Item | None = items[0] if len(items) == 1 else None
    if culprit is None:
        probe = np.empty((1, len(times), len(bands), height, width), dtype=dtype)
        for it in items:
            try:
                native = _materialize([it], times, bands, height, width)[0]
                _capi.read_into(probe, [(native.scene.source, native.scene.header,
                                         native.row, native.col)], times, bands, height, width)
            except Exception:
                culprit = it
                break
    selection = _selection_text(times, bands, height, width,
                                [culprit] if culprit else list(items))
    if culprit is None:
        names = ", ".join(it.scene.describe() for it in items[:3])
        return _rewrap(exc, f"reading {len(items)} windows from {names}: {selection}")
    return _rewrap(exc, f"{culprit.scene.describe()}: reading {selection}")


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
    return _capi.plan_ranges(scene.header, times, bands, row, col, height, width)
