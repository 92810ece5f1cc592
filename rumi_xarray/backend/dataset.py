"""Assemble the Dataset of a cube: lazily indexed variables, coordinates, encoding.

The variables are built as CF-encoded data (time in seconds with ``units``,
``_FillValue``/``scale_factor``/``add_offset`` where known) and decoded by
xarray's own :func:`xarray.decode_cf`, so every standard decoding keyword
(``mask_and_scale``, ``decode_times``, ``use_cftime``, ``decode_coords``...)
behaves exactly as with xarray's other backends, lazily.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from xarray.core import indexing

from rumi_xarray.backend.array import RumiBackendArray
from rumi_xarray.conventions import cf, crs_index, decoding, georef, netcdf
from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.attributes import apply as apply_attributes
from rumi_xarray.conventions.bands import BandCoords, band_numbers
from rumi_xarray.conventions.time import time_coords, time_seconds
from rumi_xarray.dask.chunks import preferred_chunks
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.grid import CUBE_DIMS

VARIABLE = "band_data"


@dataclass(frozen=True)
class CubeLabels:
    """The labels of a cube's axes and its CF attributes, from headers, sidecar or catalog.

    Band texts label ``band``, time steps ``time``, the transform and CRS ``y``
    and ``x``: what the Dataset's coordinates are built from.

    Parameters
    ----------
    bands : tuple of str
    seconds : numpy.ndarray
        POSIX seconds per cube time step (interval starts for intervals).
    bounds : numpy.ndarray or None
        ``(n, 2)`` interval bounds in POSIX seconds.
    transform : tuple of float or None
    crs : int, str or None
        EPSG code, or the full CRS (WKT) a sidecar keeps for a CRS that is
        not exactly an EPSG one.
    pixel_is_point : bool or None
    cf : dict
        CF attributes Rumi has no field for (``_FillValue``, ``scale_factor``,
        ``add_offset``, ``units``...), from a sidecar, a catalog or the caller.
    attributes : Attributes
        The source's other attributes (GDAL tags, netCDF globals), from a
        sidecar or what a catalog's scenes agree on.
    """

    bands: tuple[str, ...]
    seconds: np.ndarray
    bounds: np.ndarray | None
    transform: tuple[float, ...] | None
    crs: int | str | None
    pixel_is_point: bool | None
    cf: Mapping[str, Any] = field(default_factory=dict)
    attributes: Attributes = field(default_factory=Attributes)

    @classmethod
    def from_metadata(cls, meta: Any, where: str = "") -> CubeLabels:
        """Return the labels of one file's ``rumi.Metadata``."""
        seconds, bounds = time_seconds(meta.time or [], where)
        return cls(bands=tuple(meta.bands or ()), seconds=seconds, bounds=bounds,
                   transform=None if meta.transform is None else tuple(meta.transform),
                   crs=meta.crs, pixel_is_point=meta.pixel_is_point)

    @property
    def georeferenced(self) -> bool:
        """Return whether the scenes carry a transform and a CRS."""
        return self.transform is not None and self.crs is not None


def build(cube: Cube, labels: CubeLabels, *, band_as_variable: bool = False,
          drop_variables: str | Iterable[str] | None = None,
          decoders: Mapping[str, Any] | None = None,
          mask_and_scale: bool | None = None) -> xr.Dataset:
    """Return the Dataset view of ``cube``.

    Parameters
    ----------
    cube : Cube
    labels : CubeLabels
    band_as_variable : bool
        One variable per band, named by its short band name, instead of
        ``band_data``.
    drop_variables : str or iterable of str, optional
    decoders : mapping, optional
        Keyword arguments of :func:`xarray.decode_cf` other than
        ``mask_and_scale`` (``decode_times``, ``use_cftime``,
        ``decode_coords``...).
    mask_and_scale : bool or None
        As every door reads it (:mod:`rumi_xarray.conventions.decoding`):
        None xarray's CF decoding, True rioxarray's masked floats, False
        the stored samples.

    Returns
    -------
    xarray.Dataset
    """
    g = cube.grid
    band_coords = BandCoords.from_texts(labels.bands)
    # One Dataset constructor call: assigning coordinates one by one costs
    # xarray an alignment each, several milliseconds per open.
    coords, indexed = georef.spatial_coords(labels.transform, labels.crs,
                                            labels.pixel_is_point, g.height, g.width)
    coords.update(time_coords(labels.seconds, labels.bounds))
    attrs: dict[str, Any] = {}
    if labels.georeferenced:
        attrs["AREA_OR_POINT"] = "Point" if labels.pixel_is_point else "Area"
    attrs.update({k: v for k, v in labels.cf.items() if not k.startswith("_")
                  and k not in cf.SCALING})
    encoded_cf = {k: v for k, v in labels.cf.items() if k in cf.PACKING}
    header = cube.scenes[0].header
    variables: dict[Hashable, xr.Variable] = {}
    targets: list[int | None] = list(range(g.bands)) if band_as_variable else [None]
    for band in targets:
        backend = RumiBackendArray(cube, band=band)
        var_attrs = dict(attrs)
        var_attrs.update(encoded_cf)
        if band is None:
            name = VARIABLE
            if g.bands == 1 and band_numbers(band_coords.texts) is None:
                # rioxarray's convention: one band's description is long_name, which
                # rio.to_raster writes back as the band's description.
                var_attrs["long_name"] = band_coords.texts[0]
        else:
            name = band_coords.names[band]
            var_attrs["long_name"] = band_coords.texts[band]
        enc = _encoding(cube, backend.dims, header, labels.georeferenced)
        backend.read_group = tuple(enc["preferred_chunks"][d] for d in backend.dims)
        variables[name] = xr.Variable(backend.dims, indexing.LazilyIndexedArray(backend),
                                      var_attrs, encoding=enc)
    if not band_as_variable:
        coords.update(band_coords.coords())
    ds = xr.Dataset(variables, coords=coords)
    if indexed is not None:
        ds = ds.assign_coords(indexed)
    ds = xr.decode_cf(ds, drop_variables=_names(drop_variables),
                      mask_and_scale=decoding.applies_cf(mask_and_scale),
                      **{k: v for k, v in dict(decoders or {}).items() if k != "mask_and_scale"})
    if decoding.promotes(mask_and_scale):
        ds = decoding.promote_dataset(ds, [n for n in variables if n in ds.variables])
    # After decoding: attributes are shown, never applied (conventions/attributes).
    apply_attributes(ds, labels.attributes, dict(zip(variables, targets, strict=True)),
                     mask_and_scale, labels.bands)
    # xarray compares this index whenever it aligns: mixed CRSs are refused.
    ds = crs_index.attach(ds, georef.GRID_MAPPING, cube.name)
    return netcdf.prepare(_forget_dropped_grid_mapping(ds))


def _encoding(cube: Cube, dims: tuple[str, ...], header: bytes,
              georeferenced: bool) -> dict[str, Any]:
    g = cube.grid
    frame = dict(zip(CUBE_DIMS, g.frame_shape, strict=True))
    enc: dict[str, Any] = {
        "preferred_chunks": preferred_chunks(cube, dims),
        "source": cube.name,
        "dtype": g.dtype,
        "rumi_header": header,
        "rumi_frame_shape": {d: frame[d] for d in dims},
        "rumi_tile_size": (g.tile_height, g.tile_width),
        "rumi_frame_layout": g.frame_layout,
        "rumi_index_order": g.index_order,
    }
    if georeferenced:
        enc["grid_mapping"] = georef.GRID_MAPPING
    return enc


def _names(drop: str | Iterable[str] | None) -> list[str] | None:
    if drop is None:
        return None
    return [drop] if isinstance(drop, str) else list(drop)


def _forget_dropped_grid_mapping(ds: xr.Dataset) -> xr.Dataset:
    """Remove ``grid_mapping`` references to a grid mapping that was dropped."""
    for var in ds.variables.values():
        for where in (var.encoding, var.attrs):
            name = where.get("grid_mapping")
            if isinstance(name, str) and name not in ds.variables:
                del where["grid_mapping"]
    return ds
