"""Digests of what changes an answer but no frame checksum covers: labels, sidecars, rows.

librumi verifies the checksum of every frame it decodes, and nothing else: a bit
flipped in a file's trailer changes a band text or a time label, an edited
sidecar changes nodata or scale, a flipped bit in a catalog table moves a scene
in time, and each is returned without a word. rumi_xarray keeps a SHA-256
digest of each, recorded when it writes them and checked when they are used:

==================  ==========================================  =========================
digest              over                                        recorded in
==================  ==========================================  =========================
``labels_digest``   a file's decoded labels: external header,   its sidecar (``to_rumi``,
                    band texts, times and intervals, transform, ``convert``)
                    CRS, PixelIsPoint (:func:`labels_digest`)
``digest``          the sidecar's own content (every other key) the sidecar
``row_digest``      every other column of a catalog row         the row (``rx.catalog``)
==================  ==========================================  =========================

One canonical form (:func:`canonical`) serves all three, so a value digests
alike however it travelled: through JSON, pandas or Parquet (a NaN and a null
are one, an integral float is its integer, bytes are hex, times are
nanoseconds since the epoch).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rumi_xarray.conventions.time import time_seconds

__all__ = ["LABEL_KEYS", "canonical", "digest", "labels", "labels_digest"]

#: What :func:`labels` holds of a file: what its header and trailer say.
LABEL_KEYS = ("header", "bands", "time_seconds", "time_bounds", "transform", "crs",
              "pixel_is_point")
#: Prefix naming the hash, so another one can follow without ambiguity.
ALGORITHM = "sha256:"

#: Nanoseconds in one unit of a pandas Timestamp.
_NANOSECONDS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def canonical(value: Any) -> Any:
    r"""Return ``value`` as plain JSON values, the same however it travelled.

    Parameters
    ----------
    value : object
        A cell, a label or a JSON value: numbers, texts, bytes, times,
        sequences (lists, tuples, numpy arrays), mappings, nulls.

    Returns
    -------
    object
        None for a null or NaN; ``"inf"``/``"-inf"``; an integral float as
        its integer; bytes as ``{"hex": ...}``; a time as nanoseconds since
        the epoch (UTC); sequences as lists; mappings with sorted keys.

    Examples
    --------
    >>> canonical([1.0, float("nan"), b"\x01", (2.5, None)])
    [1, None, {'hex': '01'}, [2.5, None]]
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return None
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return int(number) if number.is_integer() and abs(number) < 2**63 else number
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"hex": bytes(value).hex()}
    if isinstance(value, (dt.datetime, dt.date, np.datetime64, pd.Timestamp)):
        stamp: Any = pd.Timestamp(value)  # NaT for a NaT datetime64
        if stamp is pd.NaT:
            return None
        # Counted in the Timestamp's own unit and scaled as a Python int: exact outside
        # 1677-2262 too, where stamp.value (nanoseconds in an int64) overflows.
        unit = np.datetime_data(stamp.asm8.dtype)[0]
        return int(stamp.asm8.view("i8")) * _NANOSECONDS[unit]
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple, np.ndarray)) or hasattr(value, "__iter__"):
        return [canonical(v) for v in value]
    return str(value)


def digest(values: Mapping[Any, Any], keys: Sequence[str]) -> str:
    """Return the digest of ``values[key]`` for each key (a missing key is a null).

    Parameters
    ----------
    values : mapping
        A row, a sidecar's JSON object, or :func:`labels`.
    keys : sequence of str
        What the digest covers.

    Returns
    -------
    str
        ``"sha256:<hex>"``.

    Examples
    --------
    >>> digest({"a": 1.0}, ["a"]) == digest({"a": 1}, ["a"])
    True
    """
    plain = {key: canonical(values.get(key)) for key in keys}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return ALGORITHM + hashlib.sha256(text.encode("ascii")).hexdigest()


def labels(meta: Any, where: str = "") -> dict[str, Any]:
    """Return what a file's header and trailer say, as a catalog row spells it.

    Parameters
    ----------
    meta : rumi.Metadata
        Of the file (read with its source: labels included).
    where : str
        Named in errors.

    Returns
    -------
    dict
        :data:`LABEL_KEYS` -> value.
    """
    seconds, bounds = time_seconds(meta.time or [], where)
    return {"header": bytes(meta.header), "bands": list(meta.bands or []),
            "time_seconds": seconds.tolist(),
            "time_bounds": None if bounds is None else bounds.ravel().tolist(),
            "transform": None if meta.transform is None else list(meta.transform),
            "crs": meta.crs, "pixel_is_point": meta.pixel_is_point}


def labels_digest(meta: Any, where: str = "") -> str:
    """Return the digest of a file's labels (:func:`labels`), as its sidecar records it.

    Parameters
    ----------
    meta : rumi.Metadata
    where : str
        Named in errors.

    Returns
    -------
    str

    Examples
    --------
    >>> import rumi  # doctest: +SKIP
    >>> labels_digest(rumi.info(source="scene.rumi"))  # doctest: +SKIP
    'sha256:...'
    """
    return digest(labels(meta, where), LABEL_KEYS)
