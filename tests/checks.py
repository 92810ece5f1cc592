"""Checks several test modules share."""

from __future__ import annotations

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
