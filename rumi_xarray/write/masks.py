"""GDAL masks (alpha bands, per-dataset and internal masks) of a GeoTIFF being written.

rioxarray reads such masks only when asked to mask (``masked=True`` or
``mask_and_scale=True``): the samples under them are ordinary values
otherwise, and an array opened with the default ``mask_and_scale=False``
carries no trace of them. The Rumi format has no mask, so :func:`apply_masks`
looks at the GDAL source the array came from (``encoding["source"]``, set by
``rioxarray.open_rasterio``) and keeps what rioxarray would mask:

- ``"nodata"`` (default): masked samples get a value that no unmasked sample
  of any band holds (the existing nodata when it is free, else NaN for floats,
  else the type's extremes...), recorded as nodata, so reopening with
  ``mask_and_scale=True`` masks exactly what rioxarray masks. Without a free
  value the write is refused, naming the ``masks`` option.
- ``"band"``: the mask (GDAL's 0-255 mask values) is written as a band of its
  own, named ``mask``; the samples stay as they are.
- ``"ignore"``: the mask is dropped, because the caller said so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.errors import RumiWriteValueError, input_error

#: What ``masks=`` accepts.
CHOICES = ("nodata", "band", "ignore")


def gdal_source(da: xr.DataArray) -> str | None:
    """Return the GDAL raster ``da`` was opened from by rioxarray, when it is a local file.

    Only arrays rioxarray opened (it records ``encoding["rasterio_dtype"]``
    beside ``source``) have GDAL masks: xarray's other engines also record
    ``source``, and opening their files with GDAL (a netCDF...) would only
    warn about a probe nobody asked for.
    """
    source = da.encoding.get("source")
    if not isinstance(source, str) or "rasterio_dtype" not in da.encoding:
        return None
    import os

    return source if os.path.isfile(source) else None


def _masked_bands(source: str) -> list[int]:
    """Return the 1-based bands whose GDAL mask is a per-dataset mask or an alpha band."""
    try:
        import rasterio  # type: ignore[import-untyped]
        from rasterio.enums import MaskFlags  # type: ignore[import-untyped]
    except ImportError:
        return []
    from rasterio.errors import RasterioError  # type: ignore[import-untyped]

    if source.lower().endswith(".rumi"):
        return []
    try:
        with rasterio.open(source) as src:
            return [i + 1 for i, flags in enumerate(src.mask_flag_enums)
                    if MaskFlags.per_dataset in flags]
    except RasterioError:  # not a GDAL raster (a netCDF through another engine...)
        return []


def apply_masks(da: xr.DataArray, where: str, masks: str = "nodata") -> xr.DataArray:
    """Return ``da`` with its GDAL source's masks kept as ``masks`` says (see the module).

    Parameters
    ----------
    da : xarray.DataArray
        As ``rioxarray.open_rasterio`` gave it (possibly selected or sliced).
    where : str
        The destination, named in errors.
    masks : {"nodata", "band", "ignore"}

    Returns
    -------
    xarray.DataArray

    Raises
    ------
    RumiWriteValueError
        An unknown ``masks`` value, or no free value for ``"nodata"``.
    """
    if masks not in CHOICES:
        raise input_error(RumiWriteValueError, f"{where}: masks={masks!r} is not one of "
                          f"{', '.join(map(repr, CHOICES))}", where)
    source = gdal_source(da)
    if masks == "ignore" or source is None or "band" not in da.dims:
        return da
    masked = _masked_bands(source)
    if not masked:
        return da
    mask = _mask(da, source, masked)
    if masks == "band":
        return _with_mask_band(da, mask)
    return _as_nodata(da, mask, where, source)


def _mask(da: xr.DataArray, source: str, masked: list[int]) -> xr.DataArray:
    """Return rioxarray's own mask of the source, lazily, laid out as ``da``."""
    import rioxarray

    chunks = {d: c[0] for d, c in zip(da.dims, da.chunks or (), strict=False)} or None
    # Opened lazily (no ``chunks=``) and chunked here under dask keys of our own:
    # rioxarray names its dask arrays from the file name, mtime and chunks only,
    # not ``masked=``, so ``open_rasterio(source, masked=True, chunks=chunks)``
    # would share every key with ``da`` itself and one would silently replace
    # the other in the combined graph (the mask lost, or a mask band holding
    # the data). Each block still reads only its own window.
    opened = rioxarray.open_rasterio(source, masked=True)
    if not isinstance(opened, xr.DataArray):  # subdatasets have no one mask
        return xr.zeros_like(da, dtype=bool)
    if chunks is not None:
        opened = opened.chunk({d: c for d, c in chunks.items() if d in opened.dims},
                              name_prefix="rumi-mask-", token=_mask_token(source, chunks))
    mask = opened.isnull()
    # The alpha band itself is never masked by GDAL (nor anything rioxarray reads
    # without a per-dataset mask).
    mask = mask & mask.band.isin(masked)
    labels = np.asarray(da.band.values) if "band" in da.coords else None
    if labels is not None and labels.dtype.kind in "iu":
        mask = mask.sel(band=labels)
    elif labels is not None and labels.size == mask.sizes["band"]:
        mask = mask.assign_coords(band=labels)  # convert's descriptions: same bands, renamed
    spatial = {d: da[d] for d in ("y", "x") if d in da.coords and d in mask.dims}
    mask = mask.sel(spatial)  # the same file gives the same coordinate bits
    return mask.drop_vars([c for c in mask.coords if c not in mask.dims]).transpose(
        *[d for d in da.dims if d in mask.dims])


def _mask_token(source: str, chunks: dict[Any, Any]) -> str:
    """Return a dask token for the mask of ``source`` in ``chunks``.

    Distinct from rioxarray's own for the same file, and changing when the
    file does (its modification time is part of it).
    """
    import hashlib
    import os

    try:
        mtime: float | None = os.path.getmtime(source)
    except OSError:
        mtime = None
    key = repr((os.path.abspath(source), mtime, sorted((str(d), c) for d, c in chunks.items()),
                "gdal-mask"))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _candidates(da: xr.DataArray) -> list[Any]:
    """Return nodata candidates: the existing nodata first, then values rarely data."""
    dtype = np.dtype(da.dtype)
    out: list[Any] = []
    existing = da.attrs.get("_FillValue", da.encoding.get("_FillValue"))
    if existing is not None:
        out.append(existing)
    if dtype.kind == "f":
        out += [np.nan, float(np.finfo(dtype).min), float(np.finfo(dtype).max), -9999.0]
    else:
        info = np.iinfo(dtype)
        out += [info.max, info.min, 0, info.max - 1, info.min + 1]
    return out


def _as_nodata(da: xr.DataArray, mask: xr.DataArray, where: str, source: str
               ) -> xr.DataArray:
    dtype = np.dtype(da.dtype)
    candidates = _candidates(da)
    valid = ~mask
    # One pass over the data for every candidate (xarray computes them together).
    taken = xr.concat([(_equals(da, c) & valid).any() for c in candidates], dim="candidate",
                      coords="minimal", compat="override").values
    free = [c for c, used in zip(candidates, taken, strict=True) if not bool(used)]
    if not free:
        raise input_error(RumiWriteValueError,
                          f"{where}: {source} has a GDAL mask (alpha band or per-dataset mask) "
                          f"and every candidate nodata value ({candidates}) also occurs as "
                          f"valid data, so the mask cannot become nodata: pass masks='band' "
                          f"(--masks band) to store it as a band of its own, or "
                          f"masks='ignore' to drop it", where)
    value = dtype.type(free[0])
    out = da.where(~mask, value)
    if np.dtype(out.dtype) != dtype:  # where() promotes when the fill needs it
        out = out.astype(dtype)
    out.attrs = {**da.attrs, "_FillValue": value}
    out.encoding = {k: v for k, v in da.encoding.items() if k != "_FillValue"}
    return out


def _equals(da: xr.DataArray, value: Any) -> xr.DataArray:
    if isinstance(value, float) and np.isnan(value):
        return da.isnull()
    return da == np.asarray(value).astype(da.dtype)


def _with_mask_band(da: xr.DataArray, mask: xr.DataArray) -> xr.DataArray:
    """Return ``da`` with one extra band ``mask``: 0 where any band is masked, else 255."""
    any_masked = mask.any("band")
    band = xr.where(any_masked, 0, 255).astype(da.dtype).expand_dims(band=["mask"])
    labels = [str(b) for b in da.band.values] if "band" in da.coords else None
    data = da.assign_coords(band=labels) if labels is not None else da
    # The file's mask holds for every step of dimensions the source has not (a time
    # added by expand_dims): the same mask band at each of them.
    others = [d for d in data.dims if d not in band.dims]
    if others:
        band = band.expand_dims({d: data.sizes[d] for d in others})
        band = band.assign_coords({d: data[d] for d in others if d in data.coords})
    out = xr.concat([data, band.transpose(*data.dims)], dim="band", coords="minimal",
                    compat="override", join="override", combine_attrs="override")
    out.encoding = dict(da.encoding)
    return out
