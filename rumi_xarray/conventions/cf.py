"""Nodata, scale, offset and units: CF facts the Rumi format has no field for.

They live beside the file in a JSON sidecar, ``<file>.aux.json`` (as GDAL keeps
such facts in ``.aux.xml`` for formats that lack them), written by
``to_rumi``/``convert``; in catalog columns and STAC items (so opening a
catalog stays at zero requests); or in ``open_dataset`` keywords for files
written elsewhere. Keywords win over the sidecar.

They reach xarray as CF attributes (``_FillValue``, ``scale_factor``,
``add_offset``, ``units``), which xarray's decoder applies when
``mask_and_scale=True`` (the default), exactly as rioxarray's
``open_rasterio(mask_and_scale=True)`` does for a GeoTIFF.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from rumi_xarray import options
from rumi_xarray.errors import RumiFormatError

#: Suffix appended to the Rumi file's name.
SIDECAR_SUFFIX = ".aux.json"
#: Format marker and version written into every sidecar.
SIDECAR_FORMAT = "rumi-xarray-sidecar"
SIDECAR_VERSION = 1

#: Sidecar keys -> CF attribute names.
_CF_NAMES = {"nodata": "_FillValue", "scale_factor": "scale_factor",
             "add_offset": "add_offset", "units": "units"}


def sidecar_path(source: str) -> str:
    """Return the sidecar path or URL of a Rumi source.

    Parameters
    ----------
    source : str

    Returns
    -------
    str
    """
    return source + SIDECAR_SUFFIX


def read_sidecar(source: Any, storage_options: Mapping[str, Any] | None = None,
                 path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Return the facts of a source's sidecar, or ``{}`` when it has none.

    Parameters
    ----------
    source : str or other source
        Only paths and URLs have sidecars.
    storage_options : dict, optional
        fsspec options for a remote sidecar.
    path : str or os.PathLike, optional
        Read this sidecar instead of the one beside ``source``.

    Returns
    -------
    dict
        Keys among ``nodata``, ``scale_factor``, ``add_offset``, ``units``.

    Raises
    ------
    RumiFormatError
        The sidecar exists but is not valid.
    """
    if path is None:
        if not isinstance(source, str):
            return {}
        path = sidecar_path(source)
    target = os.fspath(path)
    text = _fetch(target, storage_options)
    if text is None:
        return {}
    try:
        content = json.loads(text)
    except ValueError as exc:
        raise RumiFormatError(f"{target}: not a valid sidecar (JSON): {exc}") from exc
    if not isinstance(content, dict) or content.get("format") != SIDECAR_FORMAT:
        raise RumiFormatError(f"{target}: not a rumi-xarray sidecar (no "
                              f"\"format\": \"{SIDECAR_FORMAT}\")")
    return {k: content[k] for k in _CF_NAMES if content.get(k) is not None}


def _fetch(target: str, storage_options: Mapping[str, Any] | None) -> str | None:
    if "://" not in target:
        if not os.path.exists(target):
            return None
        with open(target, encoding="utf-8") as f:
            return f.read()
    try:
        import fsspec

        with fsspec.open(target, "rb", **dict(storage_options or {})) as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except ImportError as exc:
        warnings.warn(f"cannot look for the sidecar {target} ({exc}); nodata, scale and "
                      f"offset are unknown unless given as keywords", RuntimeWarning,
                      stacklevel=4)
        return None


def write_sidecar(path: str | os.PathLike[str], facts: Mapping[str, Any]) -> str | None:
    """Write (or remove) the sidecar of a local Rumi file.

    Parameters
    ----------
    path : str or os.PathLike
        The Rumi file.
    facts : mapping
        ``nodata``, ``scale_factor``, ``add_offset``, ``units``; ``None``
        values are left out. No fact at all removes a stale sidecar.

    Returns
    -------
    str or None
        The sidecar path, or None when nothing needed one.
    """
    target = sidecar_path(os.fspath(path))
    kept = {k: _plain(v) for k, v in facts.items() if k in _CF_NAMES and v is not None}
    if not kept:
        if os.path.exists(target):
            os.remove(target)
        return None
    content = {"format": SIDECAR_FORMAT, "version": SIDECAR_VERSION, **kept}
    temporary = target + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(content, f, indent=1, allow_nan=True)
        f.write("\n")
    os.replace(temporary, target)
    return target


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def gather(source: Any, *, sidecar: bool | str | os.PathLike[str] | None = None,
           storage_options: Mapping[str, Any] | None = None, nodata: Any = None,
           scale_factor: float | None = None, add_offset: float | None = None,
           units: str | None = None, dtype: np.dtype | None = None,
           where: str = "") -> dict[str, Any]:
    """Return the CF attributes of a source: its sidecar's, overridden by keywords.

    Parameters
    ----------
    source : str or other source
    sidecar : bool or path, optional
        ``None``: the ``sidecar`` option; ``False``: do not look; a path:
        read that sidecar.
    storage_options : mapping, optional
    nodata, scale_factor, add_offset, units : optional
        Explicit facts; they win over the sidecar.
    dtype : numpy.dtype, optional
        The file's sample type: ``_FillValue`` is cast to it.
    where : str
        Named in errors.

    Returns
    -------
    dict
        CF attributes: ``_FillValue``, ``scale_factor``, ``add_offset``,
        ``units``, whichever are known.
    """
    look = options.option("sidecar") if sidecar is None else sidecar
    facts: dict[str, Any] = {}
    if look is not False:
        path = None if look is True else look
        facts.update(read_sidecar(source, storage_options, path))
    given = {"nodata": nodata, "scale_factor": scale_factor, "add_offset": add_offset,
             "units": units}
    facts.update({k: v for k, v in given.items() if v is not None})
    return cf_attributes(facts, dtype, where)


def cf_attributes(facts: Mapping[str, Any], dtype: np.dtype | None, where: str = ""
                  ) -> dict[str, Any]:
    """Return CF attributes for facts named as in the sidecar.

    Parameters
    ----------
    facts : mapping
        ``nodata``, ``scale_factor``, ``add_offset``, ``units``.
    dtype : numpy.dtype, optional
        The stored sample type, for ``_FillValue``.
    where : str

    Returns
    -------
    dict
    """
    out: dict[str, Any] = {}
    for key, name in _CF_NAMES.items():
        value = facts.get(key)
        if value is None:
            continue
        if key == "nodata":
            value = _fill_value(value, dtype, where)
            if value is None:
                continue
        elif key in ("scale_factor", "add_offset"):
            value = float(value)
        else:
            value = str(value)
        out[name] = value
    return out


def _fill_value(value: Any, dtype: np.dtype | None, where: str) -> Any:
    number = float(value)
    if dtype is None:
        return number
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        if math.isnan(number) or not number.is_integer():
            raise RumiFormatError(f"{where}: nodata {value!r} cannot be a {dtype} sample")
        info = np.iinfo(dtype)
        if not info.min <= number <= info.max:
            raise RumiFormatError(f"{where}: nodata {value!r} is outside the range of "
                                  f"{dtype}")
        return dtype.type(int(number))
    if dtype.kind == "b":
        return np.bool_(bool(number))
    return dtype.type(number)
