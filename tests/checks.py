"""Checks several test modules share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

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
