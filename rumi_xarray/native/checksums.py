"""librumi's frame checksum verification: its state, applying a choice, refusing reads.

librumi fixes verification at the first decoded frame of a process
(``rumi.set_checksum_verification`` then raises ``RuntimeError: checksum
verification is pinned at 0, not 1``); ``rumi.get_checksum_verification``
tells the current (or fixed) value, and ``RUMI_VERIFY`` is its starting value.
There is no query for *whether* it is fixed, so a choice is applied by setting
it and reading the refusal.

A protection the user asked for and cannot have never degrades to a warning:
when verification is wanted (rumi_xarray's default) but pinned off, every read
through rumi_xarray raises :class:`~rumi_xarray.errors.RumiVerificationError`
saying how to get it back or to accept unverified reads
(:func:`refusal`). ``rx.set_options(verify=...)`` reaches :func:`apply` at once,
before a direct ``rumi.read`` fixes it, through the hook the package registers
with :func:`rumi_xarray.options.on_set` (the registry sits below ``native/`` and
imports nothing of it); this module imports nothing of rumi_xarray but the errors.
"""

from __future__ import annotations

import threading
import warnings

import rumi

from rumi_xarray.errors import RumiVerificationError

_lock = threading.Lock()
_warned_forced_on = False

#: How to get verification back, and how to do without it: said by every refusal.
REMEDY = ("To verify, restart the process and import rumi_xarray before the first direct "
          "rumi.read (importing it turns verification on), or start the process with "
          "RUMI_VERIFY=1 in its environment (dask workers too). To accept unverified reads, "
          "call rx.set_options(verify=False) or set RUMI_VERIFY=0.")

_PINNED_OFF = ("librumi's checksum verification is pinned off in this process: a frame "
               "was decoded without it before rumi_xarray could turn it on (a direct "
               "rumi.read or rumi.read_many before rumi_xarray was imported, or a read inside "
               "rx.set_options(verify=False)), "
               "and librumi fixes the setting at the first decoded frame. Without it a "
               "corrupt frame can come back as wrong numbers.")


def active() -> bool:
    """Return whether librumi verifies frame checksums in this process.

    Returns
    -------
    bool
    """
    return bool(rumi.get_checksum_verification())


def apply(on: bool, *, strict: bool) -> None:
    """Set librumi's verification to ``on`` if it is not fixed yet.

    Parameters
    ----------
    on : bool
    strict : bool
        Raise when verification is wanted but pinned off (an explicit
        ``rx.set_options(verify=True)``); otherwise leave the refusal to the
        reads (:func:`refusal`). Verification pinned *on* when ``on`` is False
        is harmless (reads are verified anyway, at a few percent): an explicit
        request is told so once with a ``RuntimeWarning``.

    Raises
    ------
    RumiVerificationError
        ``strict`` and verification pinned off.
    """
    global _warned_forced_on
    with _lock:
        if active() == on:
            return
        try:
            rumi.set_checksum_verification(bool(on))
            return
        except RuntimeError:
            pass  # pinned at the other value
    if on and strict:
        raise RumiVerificationError(f"cannot turn checksum verification on: {_PINNED_OFF} "
                                    f"{REMEDY}")
    if not on and strict and not _warned_forced_on:
        _warned_forced_on = True
        warnings.warn("librumi's checksum verification is pinned on in this process (a "
                      "frame was decoded with it), so reads stay verified despite "
                      "verify=False", RuntimeWarning, stacklevel=4)


def refusal(where: str, source: str | None = None) -> RumiVerificationError:
    """Return the error that stops a read which verification cannot protect.

    Parameters
    ----------
    where : str
        The file(s) and selection being read.
    source : str, optional
        Credential-free source name, kept as ``.source``.

    Returns
    -------
    RumiVerificationError
    """
    err = RumiVerificationError(
        f"{where}: refusing to read without checksum verification, which rumi_xarray "
        f"applies by default (option verify=True). {_PINNED_OFF} {REMEDY}")
    err.source = source
    return err
