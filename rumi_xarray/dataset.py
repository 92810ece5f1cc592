"""Assemble a lazily indexed xarray Dataset from a cube and its labels."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from xarray.core import indexing

from rumi_xarray import grid as grid_mod
from rumi_xarray import metadata
from rumi_xarray.array import RumiBackendArray
from rumi_xarray.cube import Cube

VARIABLE = "band_data"


@dataclass(frozen=True)
class Labels:
    """What the files say about their axes: band texts, time, georeferencing.

    Parameters
    ----------
    bands : tuple of str
    seconds : numpy.ndarray
        POSIX seconds per cube time step (interval starts for intervals).
    bounds : numpy.ndarray or None
        ``(n, 2)`` interval bounds in POSIX seconds.
    transform : tuple of float or None
    crs : int or None
        EPSG code.
    pixel_is_point : bool or None
    """

    bands: tuple[str, ...]
    seconds: np.ndarray
    bounds: np.ndarray | None
    transform: tuple[float, ...] | None
    crs: int | None
    pixel_is_point: bool | None

    @classmethod
    def from_metadata(cls, meta: Any) -> Labels:
        """Return the labels of one file's ``rumi.Metadata``."""
        seconds, bounds = metadata.time_seconds(meta.time or [])
        return cls(bands=tuple(meta.bands or ()), seconds=seconds, bounds=bounds,
                   transform=None if meta.transform is None else tuple(meta.transform),
                   crs=meta.crs, pixel_is_point=meta.pixel_is_point)

    @property
    def georeferenced(self) -> bool:
        """Return whether the scenes carry a transform and a CRS."""
        return self.transform is not None and self.crs is not None


def build(cube: Cube, labels: Labels, *, has_time: bool, band_as_variable: bool = False,
          decode_times: bool = True, drop_variables: str | Iterable[str] | None = None
          ) -> xr.Dataset:
    """Return the Dataset view of ``cube``.

    Parameters
    ----------
    cube : Cube
    labels : Labels
    has_time : bool
        Keep ``time`` as a dimension (False squeezes a single step into a
        scalar coordinate).
    band_as_variable : bool
        One variable per band, named by band text, instead of ``band_data``.
    decode_times : bool
    drop_variables : str or iterable of str, optional

    Returns
    -------
    xarray.Dataset
    """
    g = cube.grid
    # One Dataset constructor call: assigning coordinates one by one costs
    # xarray an alignment each, several milliseconds per open.
    coords, indexed = metadata.spatial_coords(labels.transform, labels.crs,
                                              labels.pixel_is_point, g.height, g.width)
    coords.update(metadata.time_coords(labels.seconds, labels.bounds,
                                       decode_times=decode_times, has_time=has_time))
    attrs = metadata.data_attrs(g, labels.bands, labels.georeferenced, labels.pixel_is_point)
    header = cube.scenes[0].header
    variables: dict[str, xr.Variable] = {}
    targets: Sequence[int | None] = range(g.bands) if band_as_variable else [None]
    for band in targets:
        backend = RumiBackendArray(cube, has_time=has_time, band=band)
        enc = metadata.data_encoding(grid_mod.preferred_chunks(g, backend.dims),
                                     cube.name, header, g.dtype, labels.georeferenced)
        var_attrs = dict(attrs)
        if band is None:
            name = VARIABLE
        else:
            name = labels.bands[band]
            var_attrs["long_name"] = name
            var_attrs["band"] = band
        variables[name] = xr.Variable(backend.dims, indexing.LazilyIndexedArray(backend),
                                      var_attrs, encoding=enc)
    if not band_as_variable:
        coords["band"] = metadata.band_coord(labels.bands)
    ds = xr.Dataset(variables, coords=coords)
    if indexed is not None:
        ds = ds.assign_coords(indexed)
    if drop_variables is not None:
        drop = [drop_variables] if isinstance(drop_variables, str) else list(drop_variables)
        ds = ds.drop_vars(drop, errors="ignore")
    return ds


def backend_arrays(obj: xr.Dataset | xr.DataArray) -> list[RumiBackendArray]:
    """Return the Rumi arrays under the variables of ``obj`` (lazy ones only)."""
    found = []
    variables = obj.variables.values() if isinstance(obj, xr.Dataset) else [obj.variable]
    for var in variables:
        inner: Any = var._data
        while inner is not None and not isinstance(inner, RumiBackendArray):
            inner = getattr(inner, "array", None)
        if inner is not None:
            found.append(inner)
    return found


def unindexed(data: Any) -> RumiBackendArray | None:
    """Return the Rumi array under xarray's lazy wrappers, unless it was indexed.

    Parameters
    ----------
    data : object
        A variable's ``_data`` (or xarray's adapter around it).

    Returns
    -------
    RumiBackendArray or None
        ``None`` when ``data`` is not Rumi-backed or a lazy selection (even
        one that keeps the shape, like a reversed slice) sits on top of it.
    """
    inner = data
    while inner is not None and not isinstance(inner, RumiBackendArray):
        if isinstance(inner, indexing.LazilyIndexedArray):
            full = all(isinstance(k, slice) and k == slice(None) for k in inner.key.tuple)
            if not full or inner.shape != inner.array.shape:
                return None
        inner = getattr(inner, "array", None)
    return inner
