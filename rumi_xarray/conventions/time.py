"""Time: Rumi's time steps and intervals <-> xarray's ``time`` and ``time_bnds``.

Rumi labels every time step with an instant (a date or a UTC date-time, whole
seconds) or an interval. Read side: :func:`time_seconds` turns librumi's
labels into POSIX seconds and :func:`time_coords` into CF coordinates. Write
side: :func:`coordinate_time`, :func:`scalar_time` and :func:`given_time` turn
whatever xarray, CF or the user give into the labels a file stores, refusing
what Rumi cannot store before anything is written. Both sides convert through
:func:`to_seconds`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import xarray as xr

# Spelled as xarray writes it (an ISO offset, not "Z"): xarray rewrites the units of
# numpy times but keeps those of dask-backed ones (time_bnds under chunks=), and CF
# wants a bounds variable's units to match its parent's exactly.
TIME_UNITS = "seconds since 1970-01-01T00:00:00+00:00"


# --- read side ------------------------------------------------------------------


def time_seconds(steps: Sequence[Any], where: str = "") -> tuple[np.ndarray, np.ndarray | None]:
    """Return POSIX seconds of time steps, and of interval bounds if any.

    Parameters
    ----------
    steps : sequence
        ``rumi.Metadata.time`` entries: dates, UTC datetimes, or
        ``(start, end)`` pairs of those.
    where : str
        Named in error messages.

    Returns
    -------
    starts : numpy.ndarray of int64
    bounds : numpy.ndarray of int64, shape (n, 2), or None for instants
    """
    if not steps:
        return np.zeros(0, dtype=np.int64), None
    if isinstance(steps[0], tuple):
        pairs = np.empty((len(steps), 2), dtype=object)
        pairs[:] = [tuple(p) for p in steps]
        bounds = to_seconds(pairs, "the time intervals", where)
        return bounds[:, 0].copy(), bounds
    values = np.empty(len(steps), dtype=object)
    values[:] = list(steps)
    return to_seconds(values, "the time steps", where), None


def time_coords(seconds: np.ndarray, bounds: np.ndarray | None
                ) -> dict[Hashable, xr.Variable]:
    """Build the CF-encoded ``time`` dimension coordinate (and ``time_bnds`` for intervals).

    ``time`` is always a dimension, even for a single step: every Rumi file
    labels its time, and stacking scenes (``xr.open_mfdataset``) or selecting
    by date needs an indexed ``time``, as odc-stac and stackstac give it. The
    values are POSIX seconds with CF ``units``; ``xr.decode_cf`` decodes them
    (or not, with ``decode_times=False``) as it does for any engine.

    Parameters
    ----------
    seconds : numpy.ndarray
        POSIX seconds per step (interval starts for intervals).
    bounds : numpy.ndarray or None
        ``(n, 2)`` interval bounds.

    Returns
    -------
    dict of xarray.Variable
    """
    # POSIX seconds count no leap seconds: CF 1.11's units_metadata says so.
    attrs: dict[str, Any] = {"standard_name": "time", "long_name": "time", "axis": "T",
                             "units": TIME_UNITS, "calendar": "proleptic_gregorian",
                             "units_metadata": "leap_seconds: none"}
    if bounds is not None:
        attrs["bounds"] = "time_bnds"
    out: dict[Hashable, xr.Variable] = {
        "time": xr.Variable(("time",), np.asarray(seconds, dtype=np.int64), attrs)}
    if bounds is not None:
        out["time_bnds"] = xr.Variable(("time", "nv"), np.asarray(bounds, dtype=np.int64),
                                       {"units": TIME_UNITS,
                                        "calendar": "proleptic_gregorian"})
    return out

def decoded_instants(seconds: Any) -> np.ndarray:
    """Return POSIX seconds as the ``time`` values ``xr.open_dataset(engine="rumi")`` gives.

    The CF coordinate of :func:`time_coords`, decoded by ``xr.decode_cf`` as
    every Dataset of ours is: naive UTC ``datetime64[ns]``, or, for times
    outside its range (1677-2262), what xarray decodes those to (cftime
    objects, with xarray's warning), never wrapped numbers.

    Parameters
    ----------
    seconds : array-like of int
        POSIX seconds per step.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> decoded_instants([0, 86400])
    array(['1970-01-01T00:00:00.000000000', '1970-01-02T00:00:00.000000000'],
          dtype='datetime64[ns]')
    """
    encoded = xr.Dataset(coords=time_coords(np.asarray(seconds, dtype=np.int64), None))
    return np.asarray(xr.decode_cf(encoded)["time"].values)


# --- write side -----------------------------------------------------------------


def coordinate_time(da: xr.DataArray, ds: xr.Dataset | None, time_dim: str,
                     where: str) -> list[Any]:
    """Return the time labels of a time dimension, from its coordinate and bounds."""
    if time_dim not in da.coords:
        raise ValueError(
            f"{where}: the {time_dim!r} dimension has no coordinate; Rumi labels every time "
            f"step: assign one (assign_coords({time_dim}=...)) or pass time=[...]")
    coord = da[time_dim]
    starts = to_seconds(_decoded(coord.variable), f"the {time_dim!r} coordinate", where)
    bounds = _bounds(coord, da, ds)
    if bounds is None:
        _check_increasing(starts, where, time_dim)
        return [instant(s) for s in starts]
    pairs = to_seconds(_decoded(bounds, coord.variable), "the time bounds", where)
    if pairs.shape != (starts.size, 2):
        raise ValueError(f"{where}: the time bounds have shape {pairs.shape}, expected "
                         f"({starts.size}, 2)")
    _check_intervals(pairs, where)
    return [(instant(a), instant(b)) for a, b in pairs]


def scalar_time(da: xr.DataArray, ds: xr.Dataset | None, time_dim: str,
                 where: str) -> list[Any]:
    """Return the single time label of data without a time dimension."""
    coord = da.coords.get(time_dim)
    if coord is None or coord.ndim != 0:
        raise ValueError(
            f"{where}: the data have no time coordinate; Rumi labels every time step: pass "
            f"time=... (a date or datetime, or a (start, end) pair), or assign a scalar "
            f"{time_dim!r} coordinate")
    start = to_seconds(_decoded(coord.variable), "the time coordinate", where)
    bounds = _bounds(coord, da, ds)
    if bounds is None:
        return [instant(start.reshape(-1)[0])]
    pair = to_seconds(_decoded(bounds, coord.variable), "the time bounds", where).reshape(-1, 2)
    _check_intervals(pair, where)
    return [(instant(pair[0, 0]), instant(pair[0, 1]))]


def _bounds(coord: xr.DataArray, da: xr.DataArray, ds: xr.Dataset | None
            ) -> xr.Variable | None:
    """Return the bounds variable a time coordinate names, if it can be found."""
    name = coord.attrs.get("bounds", coord.encoding.get("bounds"))
    if not isinstance(name, str):
        return None
    if name in da.coords:
        return da[name].variable
    if ds is not None and name in ds.variables:
        return ds[name].variable
    return None


def _decoded(var: xr.Variable, units_from: xr.Variable | None = None) -> np.ndarray:
    """Return time values, decoding numbers that carry CF ``units``."""
    values = np.asarray(var.values)
    if values.dtype.kind not in "iuf":
        return values
    attrs = dict(var.attrs)
    if "units" not in attrs and units_from is not None:
        for key in ("units", "calendar"):
            if key in units_from.attrs:
                attrs[key] = units_from.attrs[key]
    if "units" not in attrs:
        return values
    decoded = xr.decode_cf(xr.Dataset({"t": xr.Variable(var.dims, values, attrs)}))
    return np.asarray(decoded["t"].values)


def given_time(time: Any, steps: int, where: str) -> list[Any]:
    """Return the labels passed as ``time=``: one per step (or one, unwrapped)."""
    if isinstance(time, tuple) or np.ndim(time) == 0:
        time = [time]
    entries = list(time)
    if len(entries) != steps:
        raise ValueError(f"{where}: time= has {len(entries)} entries for {steps} time "
                         f"step(s)")
    if all(isinstance(e, tuple) for e in entries):
        pairs = to_seconds(np.array([[a, b] for a, b in entries], dtype=object),
                         "time=", where)
        _check_intervals(pairs, where)
        return [(instant(a), instant(b)) for a, b in pairs]
    if any(isinstance(e, tuple) for e in entries):
        raise ValueError(f"{where}: time= mixes instants and (start, end) intervals; a file "
                         f"records one kind")
    seconds = to_seconds(np.array(entries, dtype=object), "time=", where)
    _check_increasing(seconds, where, "time")
    return [instant(s) for s in seconds]


def to_seconds(values: Any, what: str, where: str) -> np.ndarray:
    """Return POSIX seconds of datetime-like values, refusing NaT and fractions."""
    import pandas as pd

    arr = np.asarray(values)
    if arr.dtype.kind != "M":
        if arr.dtype.kind in "iufb":
            raise ValueError(f"{where}: {what} holds numbers without CF time units; "
                             f"give dates (datetime64, datetime or ISO text)")
        try:
            index = pd.to_datetime(arr.ravel(), utc=True)
        except (TypeError, ValueError, OverflowError) as exc:
            kinds = sorted({type(v).__name__ for v in arr.ravel().tolist()})
            raise ValueError(
                f"{where}: {what} cannot be read as UTC dates ({', '.join(kinds)}): {exc}; "
                f"Rumi records proleptic Gregorian UTC times (convert cftime calendars with "
                f".convert_calendar('standard', use_cftime=False))") from exc
        arr = index.tz_convert(None).to_numpy().reshape(arr.shape)
    if np.isnat(arr).any():
        position = np.argwhere(np.isnat(arr))[0].tolist()
        raise ValueError(f"{where}: {what} has a missing time (NaT) at {position}; Rumi "
                         f"labels every time step")
    whole = arr.astype("datetime64[s]")
    fractional = whole.astype(arr.dtype) != arr
    if fractional.any():
        first = arr[tuple(np.argwhere(fractional)[0])]
        raise ValueError(f"{where}: {what} has {first}, a fraction of a second; Rumi records "
                         f"whole seconds: round first (e.g. .dt.floor('s'))")
    return whole.astype(np.int64)


def instant(seconds: Any) -> np.datetime64:
    """Return POSIX seconds as a ``datetime64[s]``."""
    return np.datetime64(int(seconds), "s")


def _check_increasing(seconds: np.ndarray, where: str, what: str) -> None:
    steps = np.diff(seconds.reshape(-1))
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        word = "repeats" if steps[bad[0]] == 0 else "goes backwards"
        raise ValueError(
            f"{where}: {what} {word} at step {i} ({instant(seconds[i - 1])} then "
            f"{instant(seconds[i])}); Rumi stores strictly increasing time steps: "
            f"sortby({what!r}) and drop duplicates first")


def _check_intervals(pairs: np.ndarray, where: str) -> None:
    for i, (start, end) in enumerate(pairs.tolist()):
        if start >= end:
            raise ValueError(f"{where}: time interval {i} ({instant(start)}, {instant(end)}) "
                             f"does not end after it starts")
    for i in range(1, len(pairs)):
        if pairs[i, 0] < pairs[i - 1, 1]:
            raise ValueError(
                f"{where}: time interval {i} starts at {instant(pairs[i, 0])}, before interval "
                f"{i - 1} ends ({instant(pairs[i - 1, 1])}); Rumi intervals are increasing "
                f"and may meet but not overlap")
