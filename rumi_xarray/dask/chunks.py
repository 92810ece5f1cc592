"""Chunk a Dataset the way ``xr.open_dataset(..., chunks=...)`` does, from preferred chunks.

``xr.open_dataset`` turns ``chunks`` into dask chunks through each variable's
``encoding["preferred_chunks"]`` (the read groups); ``Dataset.chunk`` does
not look at them. Cubes rumi_xarray builds itself (catalogs, STAC) are chunked
here with the same rules, so ``chunks={}`` means one read group per chunk on
every path.

One difference: dask's ``"auto"`` sizes can split frames (its estimate starts
from the median block, which a partial edge block drags below a frame when a
dimension has two blocks, e.g. 300 rows of 256-row tiles give 226 + 74), and
here they are moved to the nearest frame boundary, so a chunk never decodes
a frame that its neighbour decodes again.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from dask.array.core import normalize_chunks


def open_chunks(ds: xr.Dataset, chunks: Any) -> dict[Hashable, tuple[int, ...]]:
    """Return the chunks ``xr.open_dataset`` would give ``ds``'s data variables.

    Parameters
    ----------
    ds : xarray.Dataset
        Lazily indexed, with ``preferred_chunks`` in its variables' encoding.
    chunks : dict, int, str or tuple
        As for :func:`xarray.open_dataset`: ``{}`` the preferred chunks,
        ``"auto"`` multiples of them, ints or a mapping per dimension.

    Returns
    -------
    dict
        Normalized chunks per dimension.
    """
    out: dict[Hashable, tuple[int, ...]] = {}
    for var in ds.data_vars.values():
        preferred: Mapping[Hashable, Any] = var.encoding.get("preferred_chunks", {})
        dims = var.dims
        wanted = dict.fromkeys(dims, chunks) if not isinstance(chunks, Mapping) else chunks
        shape = tuple(wanted.get(d) or preferred.get(d, n)
                      for d, n in zip(dims, var.shape, strict=True))
        previous = tuple(preferred.get(d, n) for d, n in zip(dims, var.shape, strict=True))
        normalized = normalize_chunks(shape, var.shape, dtype=var.dtype,
                                      previous_chunks=previous)
        frame: Mapping[Hashable, int] = var.encoding.get("rumi_frame_shape", {})
        for dim, blocks, size in zip(dims, normalized, var.shape, strict=True):
            if wanted.get(dim) == "auto" and frame.get(dim):
                blocks = frame_aligned(blocks, int(frame[dim]), size)
            out.setdefault(dim, tuple(int(b) for b in blocks))
    return out


def frame_aligned(blocks: tuple[int, ...], frame: int, size: int) -> tuple[int, ...]:
    """Return ``blocks`` with every inner boundary moved to the nearest frame boundary.

    Parameters
    ----------
    blocks : tuple of int
        Block sizes along one dimension (summing to ``size``).
    frame : int
        Frame extent along that dimension.
    size : int

    Returns
    -------
    tuple of int
        Blocks of whole frames (the last one may be a partial edge frame),
        never empty; blocks that would shrink to nothing are merged.
    """
    bounds: list[int] = []
    for edge in np.cumsum(blocks)[:-1].tolist():
        snapped = max(frame, round(edge / frame) * frame)
        if snapped < size and (not bounds or snapped > bounds[-1]):
            bounds.append(snapped)
    edges = [0, *bounds, size]
    return tuple(int(step) for step in np.diff(edges))


def chunk_like_open_dataset(ds: xr.Dataset, chunks: Any) -> xr.Dataset:
    """Return ``ds`` chunked as ``xr.open_dataset(..., chunks=chunks)`` would chunk it.

    Parameters
    ----------
    ds : xarray.Dataset
    chunks : dict, int, str or tuple

    Returns
    -------
    xarray.Dataset
    """
    return ds.chunk(open_chunks(ds, chunks))
