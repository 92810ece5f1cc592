"""librumi's process-wide settings, applied at rumi_xarray's first read.

librumi pins its thread pool size and its checksum setting at first use. They
are chosen from :mod:`rumi_xarray.options` right before rumi_xarray's first
native read in each process (dask workers and forked children included),
never at import: importing rumi_xarray changes nothing for a process that
never reads through it. Checksum verification is on unless the user turned it
off (``verify=False`` or ``RUMI_VERIFY=0``); the pool gets one thread per dask
worker thread unless the user chose a size.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings

import rumi

from rumi_xarray import options
from rumi_xarray.errors import RumiSettingsError

_lock = threading.Lock()
_configured_pid: int | None = None
_warned = False


def configure() -> None:
    """Apply the settings once per process, before its first read."""
    global _configured_pid
    pid = os.getpid()
    if _configured_pid == pid:
        return
    with _lock:
        if _configured_pid == pid:
            return
        _apply_verify(bool(options.option("verify")), strict=False)
        _apply_threads(options.option("threads"))
        _configured_pid = pid


def _apply_verify(on: bool, strict: bool) -> None:
    global _warned
    if rumi.get_checksum_verification() == on:
        return
    try:
        rumi.set_checksum_verification(on)
    except RuntimeError:
        state = "on" if rumi.get_checksum_verification() else "off"
        message = (
            f"librumi's checksum verification is pinned {state} in this process (a frame "
            f"was decoded before rumi_xarray's first read, or RUMI_VERIFY says so); "
            f"{'corrupted frames may then return wrong numbers silently. ' if not on else ''}"
            f"Choose it with rx.set_options(verify=...) or RUMI_VERIFY before the first "
            f"read of the process.")
        if strict:
            raise RumiSettingsError(message) from None
        if not _warned:
            _warned = True
            warnings.warn(message, RuntimeWarning, stacklevel=4)


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


def _on_verify(on: bool) -> None:
    if _configured_pid == os.getpid():
        _apply_verify(bool(on), strict=True)


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
    return bool(rumi.get_checksum_verification())


options.on_change("verify", _on_verify)
options.on_change("threads", _on_threads)
