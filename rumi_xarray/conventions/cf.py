"""Nodata, scale, offset and units on the read side: CF attributes of a file.

The facts (:class:`~rumi_xarray.conventions.facts.Facts`) come from the
file's sidecar (:mod:`rumi_xarray.conventions.sidecar`), catalog columns or
STAC items (so opening a catalog stays at zero requests), or from
``open_dataset`` keywords for files written elsewhere. Keywords win over the
sidecar.

They reach xarray as CF attributes (``_FillValue``, ``scale_factor``,
``add_offset``, ``units``), which xarray's decoder applies unless
``mask_and_scale=False`` (see :mod:`rumi_xarray.conventions.decoding`,
the policy every door applies), exactly as rioxarray's
``open_rasterio(mask_and_scale=True)`` does for a GeoTIFF: the decoded type is
``float32`` for samples of 16 bits or less and ``float64`` otherwise (GDAL's
and rioxarray's rule), unless the sidecar's ``decoded_dtype`` says otherwise
(a netCDF variable whose ``scale_factor`` was a float64 decodes to float64,
as CF says). The write side (packing what ``to_rumi`` stores) is
:mod:`rumi_xarray.write.packing`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from rumi_xarray import options
from rumi_xarray.conventions.facts import Facts, declared_type, nodata_sample
from rumi_xarray.conventions.sidecar import Prefetch, Sidecar, read_sidecar
from rumi_xarray.errors import RumiFormatError, argument_error

#: CF attributes that scale packed samples.
SCALING = ("scale_factor", "add_offset")
#: CF attributes that describe packing and masking (xarray's decoder moves them to encoding).
PACKING = ("_FillValue", "missing_value", *SCALING)


def source_facts(source: Any, *, sidecar: bool | str | os.PathLike[str] | None = None,
                 storage_options: Mapping[str, Any] | None = None, nodata: Any = None,
                 scale_factor: float | None = None, add_offset: float | None = None,
                 units: str | None = None, dtype: np.dtype | None = None,
                 where: str = "", pending: Prefetch | None = None,
                 found: Sidecar | None = None) -> Sidecar:
    """Return what a source's sidecar says, overridden by the keywords given.

    Parameters
    ----------
    source : str or other source
    sidecar : bool or path, optional
        ``None``: the ``sidecar`` option; ``False``: do not look; a path:
        read that sidecar.
    storage_options : mapping, optional
    nodata, scale_factor, add_offset, units : optional
        Explicit facts; they win over the sidecar. A typed (numpy)
        ``scale_factor`` or ``add_offset`` declares the decoded type.
    dtype : numpy.dtype, optional
        The file's sample type: ``nodata=`` must be one of its samples.
    where : str
        Named in errors.
    pending : Prefetch, optional
        The sidecar's GET, already started by
        :func:`~rumi_xarray.conventions.sidecar.prefetch`.
    found : Sidecar, optional
        The sidecar, already read (it is not read again).

    Returns
    -------
    Sidecar
        :func:`cf_attributes` of its ``facts`` are the variable's CF
        attributes.

    Raises
    ------
    RumiArgumentError
        ``nodata=`` cannot be a sample of ``dtype``.
    """
    if found is None:
        found = read_source_sidecar(source, sidecar=sidecar, storage_options=storage_options,
                                    pending=pending)
    if nodata is not None:
        _check_nodata_keyword(nodata, dtype, where)
    given = {"nodata": nodata, "scale": scale_factor, "offset": add_offset, "units": units,
             "decoded_dtype": declared_type({"scale_factor": scale_factor,
                                             "add_offset": add_offset})}
    given = {k: v for k, v in given.items() if v is not None}
    if found.facts.decoded_dtype is not None:
        given.pop("decoded_dtype", None)  # the writer's record wins over a typed keyword
    return replace(found, facts=replace(found.facts, **given)) if given else found


def read_source_sidecar(source: Any, *, sidecar: bool | str | os.PathLike[str] | None = None,
                        storage_options: Mapping[str, Any] | None = None,
                        pending: Prefetch | None = None) -> Sidecar:
    """Return a source's sidecar as the ``sidecar=`` keyword asks (empty when not read).

    Parameters
    ----------
    source : str or other source
    sidecar : bool or path, optional
        As for :func:`source_facts`.
    storage_options : mapping, optional
    pending : Prefetch, optional

    Returns
    -------
    Sidecar
    """
    look = options.option("sidecar") if sidecar is None else sidecar
    if look is False:
        return Sidecar()
    return read_sidecar(source, storage_options, None if look is True else look, pending)


def _check_nodata_keyword(value: Any, dtype: np.dtype | None, where: str) -> None:
    """Raise ``RumiArgumentError`` (``keyword="nodata"``) when ``nodata=`` cannot be a sample.

    The same value from a sidecar is the file's fault (``RumiFormatError``);
    typed as a keyword, it is the caller's.
    """
    try:
        nodata_sample(value, dtype)
    except ValueError as exc:
        raise argument_error(f"{where}: nodata={value!r} cannot be used with this file's "
                             f"{np.dtype(dtype)} samples ({exc})", "nodata", where) from None


def cf_attributes(facts: Facts, dtype: np.dtype | None, where: str = "") -> dict[str, Any]:
    """Return the CF attributes of a file's facts.

    Parameters
    ----------
    facts : Facts
    dtype : numpy.dtype, optional
        The stored sample type, for ``_FillValue`` and the decoded type.
    where : str
        Named in errors.

    Returns
    -------
    dict
        ``_FillValue`` (a sample of ``dtype``), ``scale_factor``,
        ``add_offset``, ``units``, whichever are known. ``scale_factor`` and
        ``add_offset`` are numpy scalars of the type packed values decode to
        (xarray's decoder takes the decoded type from them).

    Raises
    ------
    RumiFormatError
        A nodata that cannot be a sample of ``dtype``, or an unknown decoded type.
    """
    decoded = decoded_type(facts, dtype, where)
    out: dict[str, Any] = {}
    if facts.nodata is not None:
        out["_FillValue"] = fill_value(facts.nodata, dtype, where)
    if facts.scale is not None:
        out["scale_factor"] = decoded.type(facts.scale)
    if facts.offset is not None:
        out["add_offset"] = decoded.type(facts.offset)
    if facts.units is not None:
        out["units"] = facts.units
    return out


def decoded_type(facts: Facts, dtype: np.dtype | None, where: str = "") -> np.dtype:
    """Return the floating-point type packed samples decode to.

    Parameters
    ----------
    facts : Facts
    dtype : numpy.dtype, optional
        The stored sample type.
    where : str

    Returns
    -------
    numpy.dtype
        float32 or float64 (:meth:`Facts.decoded_type
        <rumi_xarray.conventions.facts.Facts.decoded_type>`).

    Raises
    ------
    RumiFormatError
        ``decoded_dtype`` is not float32 or float64.
    """
    try:
        return facts.decoded_type(dtype)
    except ValueError as exc:
        raise RumiFormatError(f"{where}: {exc}") from None


def fill_value(value: Any, dtype: np.dtype | None, where: str) -> Any:
    """Return a nodata value as a sample of ``dtype``, or raise naming ``where``.

    See :func:`rumi_xarray.conventions.facts.nodata_sample`.

    Parameters
    ----------
    value : number
    dtype : numpy.dtype or None
    where : str

    Returns
    -------
    numpy scalar, int or float

    Raises
    ------
    RumiFormatError
        It cannot be one (the file's or its sidecar's fault).
    """
    try:
        return nodata_sample(value, dtype)
    except ValueError as exc:
        raise RumiFormatError(f"{where}: {exc}") from None
