"""Atomic file writes: a temporary file beside the target replaces it only when complete.

A write killed outright (SIGKILL, a lost node, SIGTERM without a handler)
cannot remove its temporary file. The name says what the file is and who
wrote it: ``.<name>.incomplete-write.<host>.<pid>.<random>.tmp`` beside
``<name>``; the next write to the same destination removes those whose
writer process, on this host, is gone (:func:`sweep_stale`).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from rumi_xarray.errors import RumiFileNotFoundError, RumiWriteError, os_error


@contextmanager
def atomic_path(target: str) -> Iterator[str]:
    """Yield a temporary path beside ``target``; it replaces ``target`` on success.

    The temporary file is created up front, so an unwritable or missing
    directory fails before any work. It is removed whatever happens
    (exceptions, KeyboardInterrupt), so a failed write leaves the directory
    as it was, including an existing file at ``target``; those of earlier
    writes to ``target`` that were killed are removed first.

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
    sweep_stale(target)
    temporary = os.path.join(directory, temporary_name(target))
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


#: What the names of temporary files say they are.
MARKER = "incomplete-write"


def _host() -> str:
    """Return this host's name as it appears in temporary names (no dots)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname()) or "host"


def temporary_name(target: str) -> str:
    """Return the name of a new temporary file for a write to ``target``.

    Parameters
    ----------
    target : str
        The destination.

    Returns
    -------
    str
        ``.<name>.incomplete-write.<host>.<pid>.<random>.tmp``, hidden beside
        the destination, naming the process writing it.

    Examples
    --------
    >>> temporary_name("/data/scene.rumi").startswith(".scene.rumi.incomplete-write.")
    True
    """
    return (f".{os.path.basename(target)}.{MARKER}.{_host()}.{os.getpid()}."
            f"{secrets.token_hex(6)}.tmp")


def sweep_stale(target: str) -> list[str]:
    """Remove the temporary files of writes to ``target`` whose process is gone.

    Only files named by :func:`temporary_name` for this destination, written
    on this host by a process that no longer exists, are removed: a write in
    progress (in this or another process) keeps its file, and so does one
    from another host sharing the directory, whose processes cannot be seen
    from here. Files that cannot be removed are left.

    Parameters
    ----------
    target : str
        The destination.

    Returns
    -------
    list of str
        The paths removed.

    Examples
    --------
    >>> sweep_stale("/nonexistent/scene.rumi")
    []
    """
    directory = os.path.dirname(os.path.abspath(target))
    prefix = f".{os.path.basename(target)}.{MARKER}.{_host()}."
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith(prefix):
            continue
        match = re.fullmatch(r"(\d+)\.[0-9a-f]{12}\.tmp", name[len(prefix):])
        if match is None or _alive(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            os.remove(path)
        except OSError:
            continue
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    """Return whether process ``pid`` exists (conservatively True when unsure)."""
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        return True
    return True
