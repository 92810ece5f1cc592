"""Checks several test modules share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pandas as pd
import xarray as xr

import rumi_xarray as rx


def assert_explain_matches_reads(obj: xr.DataArray | xr.Dataset, label: Any = None,
                                 load: Any = None) -> tuple[Any, dict[str, int]]:
    """Explain ``obj``, load it, and assert explain() predicted exactly what was read.

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
    label : object, optional
        Shown when the assertion fails.
    load : callable, optional
        How to load ``obj`` (default ``obj.load()``); its result is returned.

    Returns
    -------
    tuple
        The explanation and ``rx.stats()`` of the load.
    """
    plan = obj.rumi.explain()
    rx.stats(reset=True)
    if load is None:
        obj.load()
    else:
        load(obj)
    s = rx.stats()
    assert (plan.calls, plan.items, plan.frames, plan.decoded_bytes) == (
        s["calls"], s["items"], s["planned_frames"], s["bytes"]), (label, plan, s)
    return plan, s


def run_threads(worker: Callable[[int], None], count: int) -> None:
    """Start ``count`` threads running ``worker(0)`` ... ``worker(count - 1)`` at once; join them.

    The workers record what went wrong themselves (an exception in a thread does not
    reach the test), so the caller asserts on what they recorded.
    """
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_with_stderr(argv: list[str], env: dict[str, str], *, terminal: bool) -> tuple[int, str]:
    """Run a program with its standard error a pipe, or a pseudo-terminal when ``terminal``.

    Parameters
    ----------
    argv : list of str
    env : dict
    terminal : bool

    Returns
    -------
    tuple
        The exit code and what the program wrote to standard error.
    """
    import os
    import subprocess

    if not terminal:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                              check=False)
        return done.returncode, done.stderr
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    # A new pseudo-terminal is 0 columns wide; tqdm would draw nothing in it.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=follower) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(timeout=300)
    os.close(leader)
    return code, b"".join(chunks).decode("utf-8", "replace")


def renew_digests(rows: pd.DataFrame) -> pd.DataFrame:
    """Return ``rows`` with each row's digest renewed: rows a test changed on purpose.

    ``rx.catalog`` records a digest over every column (path included), so a row
    edited after it (a path made relative, pointed elsewhere, a time moved) is
    refused as damaged unless its digest is renewed, as a user would renew it.

    Parameters
    ----------
    rows : pandas.DataFrame
        Catalog rows.

    Returns
    -------
    pandas.DataFrame
        A copy with :data:`~rumi_xarray.catalogs.table.ROW_DIGEST` renewed.
    """
    from rumi_xarray.catalogs.table import ROW_DIGEST, row_digest

    out = rows.copy()
    out[ROW_DIGEST] = [row_digest(row) for _, row in out.iterrows()]
    return out
