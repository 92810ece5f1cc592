"""Counters of what this process read through librumi (``rx.stats()``)."""

from __future__ import annotations

import threading
from typing import Any

#: Counter names, in the order :func:`rumi_xarray.stats` reports them.
COUNTERS = ("calls", "items", "planned_frames", "bytes", "metadata")


class ReadStats:
    """Process-wide counters of native reads, shared by all threads.

    ``calls``: native read calls (one per ``rumi_read``/``rumi_read_many``);
    ``items``: windows across those calls; ``planned_frames``: frames librumi's
    plan of those windows touches (a prediction: librumi reports no count of
    what it decoded; the tests measure fetched frames at the loopback server);
    ``bytes``: bytes the calls returned (decoded samples handed back);
    ``metadata``: metadata look-ups that touched a source.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTERS, 0)

    def add(self, **counts: int) -> None:
        """Add to the named counters."""
        with self._lock:
            for key, value in counts.items():
                self._counts[key] += value

    def snapshot(self, reset: bool = False) -> dict[str, int]:
        """Return a copy of the counters, zeroing them when ``reset``."""
        with self._lock:
            out = dict(self._counts)
            if reset:
                self._counts = dict.fromkeys(COUNTERS, 0)
            return out


STATS = ReadStats()


def snapshot(reset: bool = False) -> dict[str, int]:
    """Return this process's read counters (picklable; run on dask workers).

    Parameters
    ----------
    reset : bool, default False

    Returns
    -------
    dict
    """
    return STATS.snapshot(reset)


def stats(reset: bool = False, client: Any = None) -> dict[str, int]:
    """Return what was read through librumi, in this process or across a cluster.

    Parameters
    ----------
    reset : bool, default False
        Zero the counters after taking them.
    client : distributed.Client, optional
        Also gather (and sum) the counters of every worker of this client's
        cluster; the client process's own reads (lazy reads, a local
        scheduler) are included.

    Returns
    -------
    dict
        ``calls`` (native read calls: one per ``rumi_read``/``rumi_read_many``),
        ``items`` (windows across those calls), ``planned_frames`` (frames
        those windows touch, as planned: librumi reports no count of frames
        it decoded), ``bytes`` (bytes of samples the calls returned) and ``metadata``
        (metadata look-ups that touched a source).

    Examples
    --------
    >>> _ = rx.stats(reset=True)
    >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
    >>> _ = ds.band_data.isel(time=0).values
    >>> rx.stats()["calls"]
    1
    """
    total = snapshot(reset)
    if client is not None:
        # client.run executes on every worker and returns {address: result}.
        for counts in client.run(snapshot, reset).values():
            for key in COUNTERS:
                total[key] += int(counts.get(key, 0))
    return total
