"""Open one Rumi source: the work behind ``engine="rumi"``, and ``rx.open_dataset``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import xarray as xr

from rumi_xarray.backend import (
    accessor,  # noqa: F401  (registers the .rumi accessor)
    dataset,
    keywords,
)
from rumi_xarray.conventions import cf, decoding, georef
from rumi_xarray.conventions import sidecar as sidecars
from rumi_xarray.model.cube import Cube, Scene
from rumi_xarray.model.grid import Grid
from rumi_xarray.native import reads
from rumi_xarray.sources import resolve
from rumi_xarray.sources.location import locate


def open_scene(filename_or_obj: Any, *, header: bytes | None = None,
               storage_options: dict[str, Any] | None = None) -> tuple[Scene, Any]:
    """Resolve a source, read its metadata and return it as a scene.

    Parameters
    ----------
    filename_or_obj : str, os.PathLike, bytes-like or file-like
    header : bytes, optional
        Checked against the source; a mismatch raises ``RumiFormatError``.
    storage_options : dict, optional
        For fsspec-only protocols.

    Returns
    -------
    scene : Scene
    meta : rumi.Metadata
    """
    return scene_of(resolve.resolve(filename_or_obj, storage_options=storage_options),
                    header)


def scene_of(source: Any, header: bytes | None = None) -> tuple[Scene, Any]:
    """Read a resolved source's metadata and return it as a scene (see :func:`open_scene`)."""
    if header is not None:
        header = bytes(header)
    meta = reads.info(source, header)
    return Scene(source, bytes(meta.header), stamp=reads.stamp(source)), meta


def open_rumi(filename_or_obj: Any, *, drop_variables: str | Iterable[str] | None = None,
              mask_and_scale: bool | None = None, decode_times: bool | None = None,
              decode_timedelta: bool | None = None, use_cftime: bool | None = None,
              concat_characters: bool | None = None, decode_coords: bool | str | None = None,
              band_as_variable: bool = False, header: bytes | None = None,
              storage_options: dict[str, Any] | None = None, nodata: Any = None,
              scale_factor: float | None = None, add_offset: float | None = None,
              units: str | None = None,
              sidecar: bool | str | os.PathLike[str] | None = None) -> xr.Dataset:
    """Open one Rumi source as a lazily indexed Dataset (the backend's work).

    See :func:`open_dataset` for the parameters.

    Returns
    -------
    xarray.Dataset
    """
    keywords.check(filename_or_obj, band_as_variable=band_as_variable,
                   mask_and_scale=mask_and_scale, decode_times=decode_times,
                   decode_timedelta=decode_timedelta, use_cftime=use_cftime,
                   concat_characters=concat_characters, decode_coords=decode_coords,
                   drop_variables=drop_variables, header=header,
                   storage_options=storage_options, nodata=nodata, scale_factor=scale_factor,
                   add_offset=add_offset, units=units, sidecar=sidecar)
    source = resolve.resolve(filename_or_obj, storage_options=storage_options)
    # A remote sidecar's GET overlaps the metadata reads instead of following them.
    pending = sidecars.prefetch(source, sidecar=sidecar, storage_options=storage_options)
    scene, meta = scene_of(source, header)
    grid = Grid.from_metadata(meta)
    cube = Cube.single(scene, grid)
    found = cf.source_facts(scene.source, sidecar=sidecar, storage_options=storage_options,
                            nodata=nodata, scale_factor=scale_factor, add_offset=add_offset,
                            units=units, dtype=grid.dtype, where=scene.name, pending=pending)
    found.check_labels(meta, scene.name)  # librumi checks frames, not the trailer's labels
    facts = cf.cf_attributes(found.facts, grid.dtype, scene.name)
    labels = dataset.CubeLabels.from_metadata(meta, scene.name)
    transform, crs, pixel_is_point = georef.with_sidecar(
        labels.transform, labels.crs, labels.pixel_is_point, found.georef(), scene.name)
    labels = dataset.CubeLabels(labels.bands, labels.seconds, labels.bounds, transform, crs,
                                pixel_is_point, facts, found.attributes)
    # xarray's default for every engine: times decoded. mask_and_scale is the policy's
    # (conventions/decoding): unset is xarray's CF decoding, True rioxarray's floats.
    decoders: dict[str, Any] = {"decode_times": True if decode_times is None else decode_times}
    for name, value in (("decode_timedelta", decode_timedelta), ("use_cftime", use_cftime),
                        ("concat_characters", concat_characters),
                        ("decode_coords", decode_coords)):
        if value is not None:
            decoders[name] = value
    return dataset.build(cube, labels, band_as_variable=band_as_variable,
                         drop_variables=drop_variables, decoders=decoders,
                         mask_and_scale=decoding.check_mask_and_scale(mask_and_scale,
                                                                      scene.name))


def open_dataset(filename_or_obj: Any, *, chunks: Any = None, **kwargs: Any) -> xr.Dataset:
    """Open a Rumi file or URL: ``xr.open_dataset(..., engine="rumi")``.

    This is exactly xarray's call with ``engine="rumi"`` (no private path):
    without ``chunks`` the variables are lazily indexed (each access is one
    planned native read); with ``chunks`` they are plain dask arrays whose
    chunks are whole frames, ``{}`` giving one read group per chunk (one
    native call each, see ``rx.set_options(group_bytes=...)``).

    Parameters
    ----------
    filename_or_obj : str, os.PathLike, bytes-like or file-like
        Local path, URL (``http(s)://``, ``s3://``, ``gs://``, ``az://``, any
        fsspec protocol), the file's bytes, or an open binary file.
    chunks : dict, int, str or tuple, optional
        As for :func:`xarray.open_dataset`: ``{}`` one read group per chunk,
        ``"auto"`` multiples of it, or explicit sizes.
    **kwargs
        Any keyword of :func:`xarray.open_dataset`. ``mask_and_scale``
        unset (xarray's default): CF decoding as for xarray's other engines,
        nodata becomes NaN and scale/offset are applied where the file has
        them, as ``rioxarray.open_rasterio(..., mask_and_scale=True)`` does,
        while integers with nothing to mask or scale stay integers. True:
        rioxarray's masked reading, always floats (float32 up to 16-bit
        samples, float64 above). False: the stored samples. The same on every
        door (``rumi_xarray.conventions.decoding``). Plus:

        band_as_variable : bool, default False
            One variable per band (named by its short band name) instead of
            ``band_data(time, band, y, x)``.
        header : bytes, optional
            The file's external header, checked against the file.
        storage_options : dict, optional
            Passed to fsspec for protocols librumi's transport cannot reach.
        nodata, scale_factor, add_offset, units : optional
            CF facts the Rumi format has no field for, for files written
            elsewhere; they override the sidecar's.
        sidecar : bool or path, optional
            Read ``<file>.aux.json`` (default: the ``sidecar`` option), or
            this file instead.

    Returns
    -------
    xarray.Dataset

    Examples
    --------
    >>> ds = rx.open_dataset("scene.rumi", chunks={})
    >>> ds.band_data.dims, ds.band_data.shape
    (('time', 'band', 'y', 'x'), (4, 4, 128, 128))
    >>> [str(b) for b in ds.band.values]
    ['B02', 'B03', 'B04', 'B08']
    """
    if isinstance(filename_or_obj, str):
        # A GDAL virtual path is opened as the URL it names: xarray before 2026.7 stats
        # any path it does not know as a URL when it chunks (pydata/xarray#11392).
        where = locate(filename_or_obj)
        if where.url and where.target:
            filename_or_obj = where.target
    return xr.open_dataset(filename_or_obj, engine="rumi", chunks=chunks, **kwargs)
