"""The open keywords of ``engine="rumi"``, checked before anything is read.

xarray hands a backend its keywords as they were typed. Left unchecked, a
wrong value either fails deep inside (``float("abc")``: a bare ``ValueError``
naming neither the keyword nor the file) or is taken for something else
(``band_as_variable="yes"`` is truthy; ``sidecar="yes"`` is a path that does
not exist). Each keyword is therefore checked here, and a wrong one raises
:class:`~rumi_xarray.errors.RumiArgumentError` (a ``ValueError``), or its
subclass :class:`~rumi_xarray.errors.RumiArgumentTypeError` (also a
``TypeError``) for a value of the wrong type, naming the keyword, the value
and the file.
"""

from __future__ import annotations

import errno
import numbers
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rumi_xarray.conventions.facts import fact_problem
from rumi_xarray.errors import (
    RumiArgumentError,
    RumiArgumentTypeError,
    RumiFileNotFoundError,
    argument_error,
    os_error,
)
from rumi_xarray.model.cube import source_name
from rumi_xarray.sources.location import locate

#: Flags of xarray's decoder that take True, False or None.
FLAGS = ("mask_and_scale", "use_cftime", "concat_characters", "band_as_variable")
#: What ``decode_coords`` accepts besides a flag.
DECODE_COORDS = ("coordinates", "all")


def where(filename_or_obj: Any) -> str:
    """Return the name of what is being opened, for messages (credentials removed).

    Parameters
    ----------
    filename_or_obj : object

    Returns
    -------
    str
    """
    if isinstance(filename_or_obj, os.PathLike):
        filename_or_obj = os.fspath(filename_or_obj)
    return source_name(filename_or_obj)


def _error(cls: type[RumiArgumentError], name: str, keyword: str, value: Any,
           problem: str) -> RumiArgumentError:
    return argument_error(f"{name}: {keyword}={value!r} {problem}", keyword, name, cls=cls)


def _flag(name: str, keyword: str, value: Any) -> None:
    if value is None or isinstance(value, (bool, np.bool_)):
        return
    raise _error(RumiArgumentTypeError, name, keyword, value, "must be True or False")


def _number(name: str, keyword: str, value: Any, text_ok: bool) -> float | None:
    """Return a number keyword as float (``None`` stays), refusing anything else."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise _error(RumiArgumentTypeError, name, keyword, value,
                     "must be a number, not a truth value")
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            if not text_ok:
                raise _error(RumiArgumentTypeError, name, keyword, value,
                             "must be a number") from None
            raise _error(RumiArgumentError, name, keyword, value,
                         "is not a number (give a number such as 0 or -9999, or "
                         "'nan'/'inf'/'-inf')") from None
    if isinstance(value, (numbers.Real, np.integer, np.floating)):
        return float(value)
    raise _error(RumiArgumentTypeError, name, keyword, value,
                 f"must be a number, not {type(value).__name__}")


def check(filename_or_obj: Any, *, band_as_variable: Any = False, mask_and_scale: Any = None,
          decode_times: Any = None, decode_timedelta: Any = None, use_cftime: Any = None,
          concat_characters: Any = None, decode_coords: Any = None,
          drop_variables: Any = None, header: Any = None, storage_options: Any = None,
          nodata: Any = None, scale_factor: Any = None, add_offset: Any = None,
          units: Any = None, sidecar: Any = None, overview_level: Any = None) -> None:
    """Raise for the first open keyword whose value cannot be used.

    Parameters
    ----------
    filename_or_obj : object
        What is being opened (named in errors).
    band_as_variable, mask_and_scale, decode_times, decode_timedelta, use_cftime,
    concat_characters, decode_coords, drop_variables, header, storage_options,
    nodata, scale_factor, add_offset, units, sidecar, overview_level
        The keywords of :func:`rumi_xarray.open_dataset`.

    Raises
    ------
    RumiArgumentTypeError
        A value of a type the keyword cannot take (``band_as_variable="yes"``).
    RumiArgumentError
        A value the keyword cannot take (``nodata="abc"``, ``scale_factor=0``).
    RumiFileNotFoundError
        ``sidecar=`` names a local file that does not exist.
    """
    from xarray.coders import CFDatetimeCoder, CFTimedeltaCoder

    name = where(filename_or_obj)
    values = {"band_as_variable": band_as_variable, "mask_and_scale": mask_and_scale,
              "use_cftime": use_cftime, "concat_characters": concat_characters}
    for keyword in FLAGS:
        _flag(name, keyword, values[keyword])
    for keyword, value, coder in (("decode_times", decode_times, CFDatetimeCoder),
                                  ("decode_timedelta", decode_timedelta, CFTimedeltaCoder)):
        if not isinstance(value, coder):
            _flag(name, keyword, value)
    if not (isinstance(decode_coords, str) and decode_coords in DECODE_COORDS):
        if isinstance(decode_coords, str):
            raise _error(RumiArgumentError, name, "decode_coords", decode_coords,
                         f"must be True, False or one of {list(DECODE_COORDS)}")
        _flag(name, "decode_coords", decode_coords)
    if drop_variables is not None and not isinstance(drop_variables, str) and not (
            isinstance(drop_variables, Iterable)
            and all(isinstance(v, str) for v in drop_variables)):
        raise _error(RumiArgumentTypeError, name, "drop_variables", drop_variables,
                     "must be a variable name or a list of names")
    if header is not None and not isinstance(header, (bytes, bytearray, memoryview)):
        raise _error(RumiArgumentTypeError, name, "header", header,
                     "must be the header's bytes (rx.catalog rows and ds.rumi.header "
                     "hold them)")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise _error(RumiArgumentTypeError, name, "storage_options", storage_options,
                     "must be a dict of fsspec options")
    _number(name, "nodata", nodata, text_ok=True)
    for keyword, value in (("scale_factor", scale_factor), ("add_offset", add_offset)):
        number = _number(name, keyword, value, text_ok=False)
        # The same check a sidecar's, a catalog row's or a STAC Item's fact passes.
        problem = None if number is None else fact_problem(keyword, number)
        if problem is not None:
            raise _error(RumiArgumentError, name, keyword, value, problem)
    if units is not None and not isinstance(units, str):
        raise _error(RumiArgumentTypeError, name, "units", units,
                     "must be a string (e.g. '1' or 'reflectance')")
    _check_sidecar(name, sidecar)
    check_overview_level(name, overview_level, sidecar)


def check_overview_level(name: str, value: Any, sidecar: Any = None) -> None:
    """Raise unless ``overview_level`` is None or a level index (0 is the first overview).

    Parameters
    ----------
    name : str
        The source, named in the error.
    value : object
    sidecar : object
        The ``sidecar`` keyword: overview levels are recorded in the sidecar,
        so ``sidecar=False`` cannot open one.

    Raises
    ------
    RumiArgumentTypeError
        Not an integer.
    RumiArgumentError
        A negative level, or ``sidecar=False``.
    """
    if value is None:
        return
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _error(RumiArgumentTypeError, name, "overview_level", value,
                     "must be an overview level: 0 for the first overview (rioxarray's "
                     "convention), or None for full resolution")
    if value < 0:
        raise _error(RumiArgumentError, name, "overview_level", value,
                     "is negative: 0 is the first overview, None full resolution")
    if sidecar is False or (isinstance(sidecar, np.bool_) and not sidecar):
        raise _error(RumiArgumentError, name, "overview_level", value,
                     "needs the file's sidecar, where its overview levels are recorded, "
                     "and sidecar=False was given")


def _check_sidecar(name: str, sidecar: Any) -> None:
    if sidecar is None or isinstance(sidecar, (bool, np.bool_)):
        return
    if not isinstance(sidecar, (str, os.PathLike)):
        raise _error(RumiArgumentTypeError, name, "sidecar", sidecar,
                     "must be True, False or the path of a sidecar file")
    path = os.fspath(sidecar)
    if locate(path).local and not os.path.exists(path):
        err = os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{name}: sidecar={sidecar!r} names no existing file (sidecar takes "
                       f"True, False or the path of a <file>.aux.json sidecar)", str(path))
        err.source = name
        raise err
