"""librumi's process-wide settings, applied at rumi_xarray's first read.

librumi pins its thread pool size and its checksum setting at first use. They
are chosen from :mod:`rumi_xarray.options` right before rumi_xarray's first
native read in each process (dask workers and forked children included).
Checksum verification is also turned on at import
(:func:`rumi_xarray.options.verify_from_import`, the one setting the import
makes), so librumi's own reads after it are verified too; it is on unless the
user turned it off (``verify=False`` or ``RUMI_VERIFY=0``), and a read it
cannot protect is refused (:mod:`rumi_xarray.native.checksums`); the pool gets
one thread per dask worker thread unless the user chose a size.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

import rumi

from rumi_xarray import options
from rumi_xarray.errors import RumiSettingsError
from rumi_xarray.native import checksums

_lock = threading.Lock()
_configured_pid: int | None = None


def configure() -> None:
    """Apply the settings once per process, before its first read."""
    global _configured_pid
    pid = os.getpid()
    if _configured_pid == pid:
        return
    with _lock:
        if _configured_pid == pid:
            return
        # Not strict: when verification is wanted but pinned off, every read
        # refuses (require_verification), rather than this first one only.
        checksums.apply(bool(options.option("verify")), strict=False)
        _apply_threads(options.option("threads"))
        _configured_pid = pid


def require_verification(where: Callable[[], tuple[str, str | None]]) -> None:
    """Refuse a read that checksum verification cannot protect although it is wanted.

    Parameters
    ----------
    where : callable
        Returns the text naming the file(s) and selection, and the source
        name; called only to build the error.

    Raises
    ------
    RumiVerificationError
        The ``verify`` option is on (the default) and librumi's verification
        is pinned off in this process.
    """
    if options.option("verify") and not checksums.active():
        text, source = where()
        raise checksums.refusal(text, source)


def _apply_threads(threads: int | None) -> None:
    if threads is None:
        if options.from_environment("threads") or rumi.get_num_threads() != 1:
            # Sized by RUMI_NUM_THREADS or by the user's own rumi.set_num_threads
            # (librumi cannot tell a default from a choice: 1 is its default).
            return
        from rumi_xarray.dask.cluster import worker_threads

        threads = worker_threads()
    if rumi.get_num_threads() == threads:
        return
    # When the pool exists already, its size is fixed for the process.
    with contextlib.suppress(RuntimeError):
        rumi.set_num_threads(threads)


def _on_threads(threads: int | None) -> None:
    if _configured_pid == os.getpid() and threads is not None:
        try:
            rumi.set_num_threads(threads)
        except RuntimeError as exc:
            raise RumiSettingsError(
                f"librumi's thread pool already has {rumi.get_num_threads()} threads in "
                f"this process; set threads before the first read") from exc


def verification() -> bool:
    """Return whether librumi verifies frame checksums in this process."""
    return checksums.active()


options.on_change("threads", _on_threads)
