"""The user-facing entry points: ``rx.open_dataset`` and ``rx.chunk``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import xarray as xr

from rumi_xarray import backend, dataset, graph


def open_dataset(filename_or_obj: Any, *, chunks: Any = None,
                 drop_variables: str | Iterable[str] | None = None, decode_times: bool = True,
                 band_as_variable: bool = False, header: bytes | None = None,
                 storage_options: dict[str, Any] | None = None,
                 group_bytes: int | None = None) -> xr.Dataset:
    """Open a Rumi file; with ``chunks``, as dask arrays read in groups.

    Returns the same Dataset (coordinates, attributes, encoding) as
    ``xr.open_dataset(..., engine="rumi")``. With ``chunks`` (``{}``: one
    chunk per frame; ``"auto"``: frame multiples; or explicit sizes) the data
    are dask arrays whose needed chunks are read in groups of neighbours, one
    native ``read_many`` per group. Without it they are lazily indexed
    (one native read per access).

    Parameters
    ----------
    filename_or_obj : str, os.PathLike, bytes-like or file-like
    chunks : dict, int, str or tuple, optional
    drop_variables : str or iterable of str, optional
    decode_times : bool, default True
    band_as_variable : bool, default False
    header : bytes, optional
    storage_options : dict, optional
    group_bytes : int, optional
        Decoded bytes per read group (default 128 MiB, or dask config
        ``rumi.group-bytes``).

    Returns
    -------
    xarray.Dataset
    """
    ds = backend.open_dataset(filename_or_obj, drop_variables=drop_variables,
                              decode_times=decode_times, band_as_variable=band_as_variable,
                              header=header, storage_options=storage_options)
    if chunks is None:
        return ds
    return chunk(ds, chunks, group_bytes=group_bytes)


def chunk(ds: xr.Dataset, chunks: Any = None, *, group_bytes: int | None = None) -> xr.Dataset:
    """Turn the lazily indexed Rumi variables of ``ds`` into grouped dask arrays.

    Parameters
    ----------
    ds : xarray.Dataset
        As returned by ``open_dataset`` without chunks (after any lazy
        ``isel``, the variables are read whole; select after chunking).
    chunks : dict, int, str or tuple, optional
        Default ``{}``: one chunk per frame.
    group_bytes : int, optional

    Returns
    -------
    xarray.Dataset
    """
    out = ds.copy()
    for name, var in ds.data_vars.items():
        if not dataset.backend_arrays(var):
            continue
        backend_array = dataset.unindexed(var.variable._data)
        if backend_array is None:
            raise ValueError(
                f"{name!r} was indexed lazily before chunking; call rx.chunk (or open "
                f"with chunks=) first and select afterwards")
        data = graph.grouped_array(backend_array, {} if chunks is None else chunks,
                                   budget=group_bytes)
        out[name] = var.copy(data=data)
        out[name].encoding = dict(var.encoding)
    return out
