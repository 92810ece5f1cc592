"""Open one Rumi source: the work behind ``engine="rumi"``, and ``rx.open_dataset``."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

import xarray as xr

from rumi_xarray.backend import (
    accessor,  # noqa: F401  (registers the .rumi accessor)
    dataset,
    keywords,
)
from rumi_xarray.conventions import cf, decoding, georef
from rumi_xarray.conventions import sidecar as sidecars
from rumi_xarray.errors import RumiFileNotFoundError, RumiIntegrityError, os_error
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
              sidecar: bool | str | os.PathLike[str] | None = None,
              overview_level: int | None = None) -> xr.Dataset:
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
                   add_offset=add_offset, units=units, sidecar=sidecar,
                   overview_level=overview_level)
    source = resolve.resolve(filename_or_obj, storage_options=storage_options)
    # A remote sidecar's GET overlaps the metadata reads instead of following them.
    pending = sidecars.prefetch(source, sidecar=sidecar, storage_options=storage_options)
    if overview_level is None:
        scene, meta = scene_of(source, header)
        found = cf.read_source_sidecar(source, sidecar=sidecar,
                                       storage_options=storage_options, pending=pending)
        found.check_labels(meta, scene.name)  # librumi checks frames, not the trailer's labels
    else:
        # The sidecar names the level's file (one GET for a remote file, no listing); only
        # the level file is read, never the file itself.
        guess = _guess_level(source, int(overview_level))
        found = cf.read_source_sidecar(source, sidecar=sidecar,
                                       storage_options=storage_options, pending=pending)
        scene, meta, found = _at_level(source, found, int(overview_level), header,
                                       storage_options, keywords.where(filename_or_obj), guess)
    grid = Grid.from_metadata(meta)
    cube = Cube.single(scene, grid)
    found = cf.source_facts(scene.source, storage_options=storage_options,
                            nodata=nodata, scale_factor=scale_factor, add_offset=add_offset,
                            units=units, dtype=grid.dtype, where=scene.name, found=found)
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
    ds = dataset.build(cube, labels, band_as_variable=band_as_variable,
                       drop_variables=drop_variables, decoders=decoders,
                       mask_and_scale=decoding.check_mask_and_scale(mask_and_scale, scene.name))
    return _record_overviews(ds, found.overviews, overview_level)


@dataclass(frozen=True)
class _Guess:
    """A remote level file's metadata read started with the sidecar's GET, on a guess."""

    source: Any
    future: Future[tuple[Scene, Any]]


def _guess_level(source: Any, level: int) -> _Guess | None:
    """Start reading the metadata of the level file ``level`` most likely is, for a URL.

    A remote level open is otherwise three round trips one after the other:
    the sidecar (which names the level's file), the level's metadata, its
    frames. ``to_rumi`` names level ``k`` of ``"auto"`` (and of factors 2, 4,
    8...) ``<file>.ovr<2^(k+1)>``: that file's metadata is read while the
    sidecar's GET runs, and used when the sidecar names it (else it is
    dropped, and the named file read after). Local files are not guessed.
    """
    from rumi_xarray.model.overviews import level_file_name

    url = getattr(source, "url", source)
    if not isinstance(url, str) or not locate(url).url:
        return None
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    target = sidecars.sibling(source, level_file_name(name, 2 ** (level + 1)))
    return _Guess(target, sidecars.background(scene_of, target))


def _at_level(source: Any, found: sidecars.Sidecar, level: int, header: bytes | None,
              storage_options: dict[str, Any] | None, where: str, guess: _Guess | None
              ) -> tuple[Scene, Any, sidecars.Sidecar]:
    """Return the scene, metadata and sidecar of overview level ``level`` of a file."""
    record = found.overviews.level(level, where)
    target = sidecars.sibling(source, record.file)
    opened = None
    if guess is not None and guess.source == target and header is None:
        try:
            opened = guess.future.result()
        except Exception:  # the guessed read failed: read the file the sidecar names, now
            opened = None
    scene, meta = opened if opened is not None else scene_of(target, header)
    scene = replace(scene, overview=(level, record.factor))
    # The labels and header the writer recorded for the level: the level read is the one
    # written (librumi's checksums cover frames only).
    replace(found, labels_digest=record.labels_digest).check_labels(meta, scene.name)
    if record.header is not None and bytes(meta.header) != record.header:
        raise RumiIntegrityError(f"{scene.name}: its header is not the one its base file's "
                                 f"sidecar recorded for overview level {level}")
    if found.geotransform is not None:
        # A grid without an EPSG code: the level's own sidecar holds its scaled grid.
        found = replace(found, geotransform=sidecars.read_sidecar(
            scene.source, storage_options).geotransform)
    return scene, meta, found


def _record_overviews(ds: xr.Dataset, overviews: sidecars.Overviews,
                      overview_level: int | None) -> xr.Dataset:
    """Record in the variables' encoding which overview level this is, and the file's levels.

    ``ds.rumi.overviews`` and ``ds.rumi.overview_level`` read them back.
    """
    found = {OVERVIEW_FACTORS: tuple(overviews.factors),
             OVERVIEW_LEVEL: None if overview_level is None else int(overview_level)}
    if overview_level is not None:
        found[OVERVIEW_FACTOR] = overviews.levels[int(overview_level)].factor
    for var in ds.data_vars.values():
        var.encoding.update(found)
    return ds


#: Encoding keys: the file's overview factors, the level opened (None: full resolution)
#: and its factor.
OVERVIEW_FACTORS = "rumi_overviews"
OVERVIEW_LEVEL = "rumi_overview_level"
OVERVIEW_FACTOR = "rumi_overview_factor"


def overview_factors(source: Any, **storage_options: Any) -> list[int]:
    """Return the overview factors of a Rumi file, level 0 first (``[]`` when it has none).

    Level ``k`` of the list is what ``xr.open_dataset(source, engine="rumi",
    overview_level=k)`` opens. Only the file's sidecar is read (one GET for a
    URL), where ``rx.to_rumi(..., overviews=...)`` recorded the levels.

    Parameters
    ----------
    source : str or os.PathLike
        Local path or URL of the Rumi file.
    **storage_options
        fsspec options for the sidecar's read (as ``storage_options=`` of
        :func:`open_dataset`).

    Returns
    -------
    list of int
        Factors such as ``[2, 4, 8]``.

    Raises
    ------
    RumiFileNotFoundError
        A local file that does not exist.
    RumiFormatError
        The sidecar is not valid (a ``RumiIntegrityError`` when it was edited).

    Examples
    --------
    >>> header = rx.to_rumi(xr.open_dataset("scene.rumi", engine="rumi"), "preview.rumi",
    ...                     tile_size=32, overviews="auto")
    >>> rx.overview_factors("preview.rumi")
    [2, 4]
    >>> xr.open_dataset("preview.rumi", engine="rumi", overview_level=1).sizes["x"]
    32
    """
    resolved = resolve.resolve(source, storage_options=storage_options or None)
    if isinstance(resolved, str) and locate(resolved).local and not os.path.exists(resolved):
        raise os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{keywords.where(source)}: no such file", keywords.where(source))
    return cf.read_source_sidecar(resolved, sidecar=True,
                                  storage_options=storage_options or None).overviews.factors


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
        overview_level : int, optional
            Open overview level ``k`` instead of the full resolution: 0 is
            the first (finest) overview, as rioxarray counts them; the levels
            are those its sidecar records (``rx.overview_factors``), each a
            Rumi file beside it. ``None`` (default): full resolution.

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
