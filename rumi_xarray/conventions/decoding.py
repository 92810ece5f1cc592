"""The one decode-and-label policy every door applies.

Every way in (``xr.open_dataset(engine="rumi")``, ``xr.open_mfdataset``,
``rx.open_dataset``, ``rx.open_mfdataset``, ``rx.open_catalog``,
``rx.open_catalog_grids``, ``rx.open_stac``, ``rx.read_chips``,
``.rumi.chips()`` and ``rumi_xarray.torch.ChipDataset``) decides here, and
nowhere else:

- what ``mask_and_scale`` means. Its three values mean the same on every
  door, and what ``xr.open_dataset(engine="rumi")`` gives:

  ``None`` (unset)
      xarray's CF decoding, as for its netCDF and Zarr engines: nodata
      becomes NaN and scale/offset are applied where the file has them;
      integer samples with nothing to mask or scale stay integers.
  ``True``
      rioxarray's masked reading (``open_rasterio(mask_and_scale=True)``):
      always floats, float32 for samples of 16 bits or less, float64 above
      (GDAL's rule), nodata as NaN, scale and offset applied.
  ``False``
      the stored samples, with ``_FillValue``, ``scale_factor``,
      ``add_offset`` as attributes.

  Each door has one default (the table in ``docs/guide/nodata-cf.md``);
  passing a value gives the same answer on every door.
- which bands ``bands=`` selects: by label (the ``band`` coordinate:
  short names, or the integers 1..n of unnamed bands), on every door;
  positions only under ``band_index=``.

Decoding itself is xarray's own CF decoder (:func:`xarray.conventions.decode_cf_variable`),
lazily, so a door that reads raw samples and decodes them here gives the
numbers ``xr.open_dataset`` gives, bit for bit.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions.attributes import SHOWN_PACKING
from rumi_xarray.conventions.bands import band_numbers
from rumi_xarray.conventions.cf import PACKING
from rumi_xarray.conventions.facts import gdal_decoded_type
from rumi_xarray.errors import RumiSelectionError, argument_error

#: The values ``mask_and_scale`` takes on every door.
MASK_AND_SCALE = (None, True, False)


def check_mask_and_scale(value: Any, where: str = "") -> bool | None:
    """Return ``mask_and_scale`` as the policy reads it, or raise naming the keyword.

    Parameters
    ----------
    value : None, bool or numpy.bool_
    where : str
        The door or file, named in the error.

    Returns
    -------
    bool or None

    Raises
    ------
    RumiArgumentTypeError
        Anything but None, True or False.

    Examples
    --------
    >>> check_mask_and_scale(None) is None
    True
    >>> check_mask_and_scale(np.True_)
    True
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    from rumi_xarray.errors import RumiArgumentTypeError

    raise argument_error(f"{where + ': ' if where else ''}mask_and_scale must be None, True "
                         f"or False, got {value!r}", "mask_and_scale", where or None,
                         cls=RumiArgumentTypeError)


def applies_cf(mask_and_scale: bool | None) -> bool:
    """Return whether nodata, scale and offset are applied (xarray's ``mask_and_scale``).

    Parameters
    ----------
    mask_and_scale : bool or None

    Returns
    -------
    bool
        True unless ``mask_and_scale`` is False.

    Examples
    --------
    >>> applies_cf(None), applies_cf(True), applies_cf(False)
    (True, True, False)
    """
    return mask_and_scale is not False


def promotes(mask_and_scale: bool | None) -> bool:
    """Return whether integers with nothing to mask or scale become floats (rioxarray's rule).

    Parameters
    ----------
    mask_and_scale : bool or None

    Returns
    -------
    bool
        True only for an explicit ``mask_and_scale=True``.

    Examples
    --------
    >>> promotes(None), promotes(True)
    (False, True)
    """
    return mask_and_scale is True


def packing_of(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Return the CF attributes decoding applies (``_FillValue``, scale, offset).

    Parameters
    ----------
    attributes : mapping
        A variable's ``attrs`` or ``encoding``, or a file's CF attributes.

    Returns
    -------
    dict

    Examples
    --------
    >>> packing_of({"_FillValue": 0, "units": "m"})
    {'_FillValue': 0}
    """
    return {k: v for k, v in attributes.items() if k in PACKING}


def applied_packing(attrs: Mapping[str, Any], encoding: Mapping[str, Any]) -> dict[str, Any]:
    """Return the CF packing a variable's ``attrs`` and ``encoding`` apply when decoding.

    GDAL's scale 1 and offset 0 a Dataset shows (named in
    ``encoding[SHOWN_PACKING]``, :mod:`rumi_xarray.conventions.attributes`) are left
    out: they are shown, never applied.

    Parameters
    ----------
    attrs, encoding : mapping

    Returns
    -------
    dict
        ``_FillValue``, ``missing_value``, ``scale_factor``, ``add_offset``
        found (``attrs`` first).

    Examples
    --------
    >>> applied_packing({"scale_factor": 1.0, "_FillValue": 0},
    ...                 {SHOWN_PACKING: ("scale_factor",)})
    {'_FillValue': 0}
    """
    shown = set(encoding.get(SHOWN_PACKING) or ())
    out: dict[str, Any] = {}
    for where in (attrs, encoding):
        for key in PACKING:
            if key in where and key not in out and key not in shown:
                out[key] = where[key]
    return out


def decode_variable(name: Hashable, variable: xr.Variable,
                    mask_and_scale: bool | None) -> xr.Variable:
    """Decode one raw variable (stored samples, CF attributes) as the policy says, lazily.

    Parameters
    ----------
    name : hashable
        The variable's name (xarray's decoder names it in warnings).
    variable : xarray.Variable
        Stored samples carrying their CF attributes.
    mask_and_scale : bool or None

    Returns
    -------
    xarray.Variable
        With ``False`` the variable as given; otherwise xarray's CF decoding
        (the packing moved to ``encoding``), then, for ``True``, integers as
        the floats of :func:`promote`.

    Examples
    --------
    >>> raw = xr.Variable("x", np.array([0, 5], np.uint8), {"_FillValue": np.uint8(0)})
    >>> decode_variable("v", raw, None).values
    array([nan,  5.], dtype=float32)
    """
    if not applies_cf(mask_and_scale):
        return variable
    from xarray.conventions import decode_cf_variable

    decoded = variable
    if packing_of(variable.attrs):
        with warnings.catch_warnings():
            # xarray's notes on its own decoding choices are not the caller's concern
            warnings.simplefilter("ignore", xr.SerializationWarning)
            decoded = decode_cf_variable(str(name), variable, mask_and_scale=True,
                                         decode_times=False, decode_timedelta=False)
    if promotes(mask_and_scale):
        decoded = promote(decoded)
    return decoded


def promote(variable: xr.Variable) -> xr.Variable:
    """Give integer samples left undecoded the floats ``mask_and_scale=True`` gives in rioxarray.

    xarray's decoder keeps integers when there is neither nodata nor scale to
    apply; ``rioxarray.open_rasterio(mask_and_scale=True)`` always reads
    masked, as float32 for samples of 16 bits or less and float64 for wider
    ones, so ``rio.pad_box`` and ``rio.reproject`` fill with NaN. The cast is
    lazy (xarray's own element-wise wrapper, as its CF decoders use), and
    ``encoding["dtype"]`` keeps the stored type, as rioxarray records it.

    Parameters
    ----------
    variable : xarray.Variable

    Returns
    -------
    xarray.Variable
        The same variable when it is not of integers.

    Examples
    --------
    >>> promote(xr.Variable("x", np.array([1, 2], np.uint16))).dtype
    dtype('float32')
    """
    if variable.dtype.kind not in "iu":
        return variable
    try:
        from xarray.coding.common import lazy_elemwise_func
    except ImportError:  # xarray before 2024.11 kept it in coding.variables
        from xarray.coding.variables import lazy_elemwise_func

    target = gdal_decoded_type(variable.dtype)
    data: Any = variable._data
    if isinstance(data, np.ndarray):
        cast: Any = data.astype(target)
    elif hasattr(data, "__dask_graph__"):
        cast = data.astype(target)
    else:
        cast = lazy_elemwise_func(data, functools.partial(_astype, dtype=target), target)
    return xr.Variable(variable.dims, cast, variable.attrs,
                       encoding={**variable.encoding, "dtype": variable.dtype})


def promote_dataset(ds: xr.Dataset, names: Sequence[Hashable]) -> xr.Dataset:
    """Return ``ds`` with the variables ``names`` promoted (:func:`promote`).

    Parameters
    ----------
    ds : xarray.Dataset
    names : sequence of hashable

    Returns
    -------
    xarray.Dataset

    Examples
    --------
    >>> ds = xr.Dataset({"v": ("x", np.array([1], np.uint8))})
    >>> promote_dataset(ds, ["v"])["v"].dtype
    dtype('float32')
    """
    changed = {name: promote(ds.variables[name]) for name in names
               if ds.variables[name].dtype.kind in "iu"}
    return ds.assign(changed) if changed else ds


def decode_samples(raw: np.ndarray, packing: Mapping[str, Any], mask_and_scale: bool | None,
                   name: Hashable = "band_data") -> np.ndarray:
    """Decode raw samples in memory (chips) exactly as a variable is decoded.

    Parameters
    ----------
    raw : numpy.ndarray
        Stored samples.
    packing : mapping
        Their CF attributes (``_FillValue``, ``scale_factor``, ``add_offset``).
    mask_and_scale : bool or None
    name : hashable

    Returns
    -------
    numpy.ndarray
        ``raw`` itself when there is nothing to do.

    Examples
    --------
    >>> decode_samples(np.array([0, 3], np.uint8), {"_FillValue": np.uint8(0)}, None)
    array([nan,  3.], dtype=float32)
    """
    attrs = packing_of(packing)
    if not applies_cf(mask_and_scale) or (not attrs and not (
            promotes(mask_and_scale) and raw.dtype.kind in "iu")):
        return raw
    dims = tuple(f"dim_{i}" for i in range(raw.ndim))
    decoded = decode_variable(name, xr.Variable(dims, raw, attrs), mask_and_scale)
    return np.asarray(decoded.values)


def decoded_dtype(stored: np.dtype, packing: Mapping[str, Any],
                  mask_and_scale: bool | None) -> np.dtype:
    """Return the type a door gives for samples of ``stored`` with these CF attributes.

    Parameters
    ----------
    stored : numpy.dtype
    packing : mapping
    mask_and_scale : bool or None

    Returns
    -------
    numpy.dtype

    Examples
    --------
    >>> decoded_dtype(np.dtype("uint8"), {}, True), decoded_dtype(np.dtype("uint8"), {}, None)
    (dtype('float32'), dtype('uint8'))
    """
    empty = np.zeros((0,), dtype=stored)
    return decode_samples(empty, packing, mask_and_scale).dtype


def _astype(values: Any, dtype: np.dtype) -> Any:
    return np.asarray(values).astype(dtype)


# --- bands -----------------------------------------------------------------------------


def select_bands(labels: Sequence[str], bands: Any = None, band_index: Any = None,
                 where: str = "") -> tuple[int, ...]:
    """Return the positions of a band selection: by label (``bands=``) or position.

    ``bands=`` names bands as the ``band`` coordinate labels them (short
    names, or the integers 1..n of unnamed bands), on every door, as
    ``.sel(band=...)`` does; ``band_index=`` takes 0-based positions, as
    ``.isel(band=...)`` does.

    Parameters
    ----------
    labels : sequence of str
        The labels of the bands, as strings (``"1"``, ``"2"``... for unnamed
        bands).
    bands : hashable or sequence, optional
        Labels.
    band_index : int or sequence of int, optional
        Positions (negative ones count from the end).
    where : str
        Named in errors.

    Returns
    -------
    tuple of int
        Every position when neither is given.

    Raises
    ------
    RumiSelectionError
        An unknown label, a position out of range, an empty selection.
    RumiArgumentError
        Both ``bands=`` and ``band_index=`` (``keyword="band_index"``).

    Examples
    --------
    >>> select_bands(["1", "2", "3"], bands=[1, 3])
    (0, 2)
    >>> select_bands(["B02", "B04"], band_index=-1)
    (1,)
    """
    prefix = f"{where}: " if where else ""
    labels = [str(b) for b in labels]
    if bands is not None and band_index is not None:
        raise argument_error(f"{prefix}give bands= (labels) or band_index= (positions), not "
                             f"both", "band_index", where or None)
    if bands is None and band_index is None:
        return tuple(range(len(labels)))
    given = bands if band_index is None else band_index
    wanted = [given] if isinstance(given, (str, int, np.integer)) else list(given)
    if not wanted:
        raise RumiSelectionError(f"{prefix}an empty band selection reads nothing")
    if band_index is not None:
        return tuple(_position(b, len(labels), prefix) for b in wanted)
    return tuple(_label(b, labels, prefix) for b in wanted)


def _position(value: Any, count: int, prefix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise RumiSelectionError(f"{prefix}band_index= takes 0-based positions, got {value!r}")
    if not -count <= int(value) < count:
        raise RumiSelectionError(f"{prefix}band position {int(value)} out of range for "
                                 f"{count} band(s)")
    return int(value) % count


def _label(value: Any, labels: list[str], prefix: str) -> int:
    numbered = band_numbers(labels) is not None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if not numbered:
            raise RumiSelectionError(
                f"{prefix}bands= selects by label and these bands are named {labels}; "
                f"pass band_index={int(value)} for a position")
        text = str(int(value))
    elif isinstance(value, str):
        text = value
    else:
        raise RumiSelectionError(f"{prefix}{value!r} is not a band label")
    if text not in labels:
        hint = (" (unnamed bands are labelled 1..n; band_index= takes 0-based positions)"
                if numbered else "")
        raise RumiSelectionError(f"{prefix}no band labelled {value!r} (bands: {labels}){hint}")
    return labels.index(text)


def band_labels(names: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """Return the ``band`` coordinate of bands with these names and stored texts.

    Unnamed bands (stored as their numbers, :func:`~rumi_xarray.conventions.bands.band_numbers`)
    are labelled 1..n (rioxarray's labels) on every door, even where a door
    names their variables ``band_1``...; named bands by their names.

    Parameters
    ----------
    names : sequence of str
        The names a door gives the bands (short names, or ``band_<n>``).
    texts : sequence of str
        The bands' stored texts.

    Returns
    -------
    numpy.ndarray
        int64 labels for unnamed bands, else strings.

    Examples
    --------
    >>> band_labels(["band_1", "band_3"], ["1", "3"])
    array([1, 3])
    >>> band_labels(["B04"], ["B04, Red"])
    array(['B04'], dtype='<U3')
    """
    numbers = band_numbers([str(t) for t in texts])
    if numbers is not None and [str(n) for n in names] in (
            [f"band_{n}" for n in numbers], [str(n) for n in numbers]):
        return np.array(numbers, dtype=np.int64)
    return np.array([str(n) for n in names], dtype=str)


def changes_samples(stored: np.dtype, packing: Mapping[str, Any],
                    mask_and_scale: bool | None) -> bool:
    """Return whether decoding changes stored samples (else a door hands them over as read).

    Parameters
    ----------
    stored : numpy.dtype
    packing : mapping
    mask_and_scale : bool or None

    Returns
    -------
    bool

    Examples
    --------
    >>> changes_samples(np.dtype("uint16"), {}, None), changes_samples(np.dtype("uint16"), {}, True)
    (False, True)
    """
    if not applies_cf(mask_and_scale):
        return False
    return bool(packing_of(packing)) or (promotes(mask_and_scale) and stored.kind in "iu")
