"""Atomic file writes: a temporary file beside the target replaces it only when complete."""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from rumi_xarray.errors import RumiFileNotFoundError, RumiWriteError, os_error


@contextmanager
def atomic_path(target: str) -> Iterator[str]:
    """Yield a temporary path beside ``target``; it replaces ``target`` on success.

    The temporary file is created up front, so an unwritable or missing
    directory fails before any work. It is removed whatever happens
    (exceptions, KeyboardInterrupt), so a failed write leaves the directory
    as it was, including an existing file at ``target``.

    Parameters
    ----------
    target : str
        Local destination path.

    Yields
    ------
    str
        The temporary path to write.
    """
    if os.path.isdir(target):
        raise os_error(RumiWriteError, errno.EISDIR, f"{target}: is a directory", target)
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{target}: directory {directory} does not exist", target)
    temporary = os.path.join(directory,
                             f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
    try:
        # os.open honours the umask (mkstemp would leave the file 0600).
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise os_error(RumiWriteError, exc.errno,
                       f"{target}: cannot write in {directory}: {exc.strerror}",
                       target) from exc
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        if os.path.lexists(temporary):
            os.remove(temporary)
