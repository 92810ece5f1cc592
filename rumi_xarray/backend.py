"""xarray backend entry point: ``xr.open_dataset(path_or_url, engine="rumi")``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import xarray as xr
from xarray.backends import BackendEntrypoint

from rumi_xarray import dataset, engine, sources
from rumi_xarray.cube import Cube
from rumi_xarray.grid import Grid

MAGIC = b"RUMI"


def open_scene(filename_or_obj: Any, *, header: bytes | None = None,
               storage_options: dict[str, Any] | None = None
               ) -> tuple[engine.Scene, Any]:
    """Resolve a source, read its metadata and return it as a scene.

    Parameters
    ----------
    filename_or_obj : str, os.PathLike, bytes-like or file-like
    header : bytes, optional
        Checked against the source; a mismatch raises ``ValueError``.
    storage_options : dict, optional
        For fsspec-only protocols.

    Returns
    -------
    scene : Scene
    meta : rumi.Metadata
    """
    source = sources.resolve(filename_or_obj, storage_options=storage_options)
    if header is not None:
        header = bytes(header)
    meta = engine.info(source, header)
    return engine.Scene(source, meta.header), meta


def open_dataset(filename_or_obj: Any, *, drop_variables: str | Iterable[str] | None = None,
                 decode_times: bool = True, band_as_variable: bool = False,
                 header: bytes | None = None,
                 storage_options: dict[str, Any] | None = None) -> xr.Dataset:
    """Open one Rumi file as a lazily indexed Dataset (no dask).

    Parameters
    ----------
    filename_or_obj : str, os.PathLike, bytes-like or file-like
        Local path, URL (``http(s)://``, ``s3://``, ``gs://``, ``az://``, any
        fsspec protocol), the file's bytes, or an open binary file.
    drop_variables : str or iterable of str, optional
    decode_times : bool, default True
        ``datetime64[ns]`` time; False gives POSIX seconds with CF units.
    band_as_variable : bool, default False
        One variable per band instead of ``band_data(band, ...)``.
    header : bytes, optional
        The file's external header; checked against the file.
    storage_options : dict, optional
        Passed to fsspec for protocols librumi's transport cannot reach.

    Returns
    -------
    xarray.Dataset
    """
    scene, meta = open_scene(filename_or_obj, header=header, storage_options=storage_options)
    grid = Grid.from_metadata(meta)
    cube = Cube.single(scene, grid)
    labels = dataset.Labels.from_metadata(meta)
    return dataset.build(cube, labels, has_time=grid.time_count > 1,
                         band_as_variable=band_as_variable, decode_times=decode_times,
                         drop_variables=drop_variables)


def _looks_like_rumi(path: str) -> bool:
    """Return whether a path or URL names a Rumi file, without network I/O."""
    if "://" in path:
        return urlsplit(path).path.lower().endswith(".rumi")
    if path.lower().endswith(".rumi"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


class RumiBackendEntrypoint(BackendEntrypoint):
    """Open Rumi rasters (``.rumi``) with xarray, lazily and frame-aligned."""

    description = "Open Rumi rasters (files or URLs) lazily, with frame-aligned chunks"
    url = "https://github.com/asterisk-labs/rumi"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "decode_times",
                               "band_as_variable", "header", "storage_options")

    def open_dataset(self, filename_or_obj: Any, *,  # type: ignore[override]
                     drop_variables: str | Iterable[str] | None = None,
                     decode_times: bool = True, band_as_variable: bool = False,
                     header: bytes | None = None,
                     storage_options: dict[str, Any] | None = None) -> xr.Dataset:
        """Open a Rumi source; see :func:`rumi_xarray.backend.open_dataset`."""
        return open_dataset(filename_or_obj, drop_variables=drop_variables,
                            decode_times=decode_times, band_as_variable=band_as_variable,
                            header=header, storage_options=storage_options)

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Recognise ``.rumi`` paths and URLs (no network request) or the magic bytes."""
        if isinstance(filename_or_obj, (bytes, bytearray, memoryview)):
            return bytes(filename_or_obj[:4]) == MAGIC
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        return isinstance(path, str) and _looks_like_rumi(path)
