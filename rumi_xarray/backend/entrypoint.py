"""xarray backend entry point: ``xr.open_dataset(path_or_url, engine="rumi")``.

xarray imports every installed backend's entry point whenever it lists
engines (any ``xr.open_dataset`` without ``engine=``), so this module imports
nothing but xarray's base class, the standard library and the two standard-library
modules that tell where a source lives (:mod:`rumi_xarray.sources.location`,
:mod:`rumi_xarray.errors`): librumi, dask and the rest of rumi_xarray load only
when a Rumi source is actually opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from xarray.backends import BackendEntrypoint

from rumi_xarray.errors import RumiUnsupportedError
from rumi_xarray.sources.location import locate

MAGIC = b"RUMI"


def _looks_like_rumi(path: str) -> bool:
    """Return whether a path or URL names a Rumi file, without network I/O."""
    try:
        where = locate(path)
    except RumiUnsupportedError:
        # A GDAL path we do not read (/vsimem/...): ours if named so, and opening it
        # then says what to pass instead.
        return path.lower().endswith(".rumi")
    if where.url:
        return urlsplit(where.target or path).path.lower().endswith(".rumi")
    if path.lower().endswith(".rumi"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


class RumiBackendEntrypoint(BackendEntrypoint):
    """Open Rumi rasters (``.rumi``) with xarray, lazily, in frame-aligned read groups.

    Every keyword of :func:`rumi_xarray.open_dataset` is accepted, including
    xarray's standard decoding keywords (``mask_and_scale``, ``decode_times``,
    ``use_cftime``, ``decode_coords``, ``decode_timedelta``,
    ``concat_characters``), applied by :func:`xarray.decode_cf` exactly as for
    other engines (``mask_and_scale`` unset: xarray's CF decoding, integers
    with nothing to mask stay integers; True: rioxarray's masked floats; False:
    the stored samples; see ``rumi_xarray.conventions.decoding``;
    ``use_cftime=True`` gives cftime datetimes, with xarray's deprecation
    warning), and ``lock`` (accepted and unused: librumi reads are
    thread-safe).

    Examples
    --------
    xarray finds this entrypoint by its name, or by the ``.rumi`` suffix:

    >>> "rumi" in xr.backends.list_engines()
    True
    >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
    >>> ds.band_data.dims
    ('time', 'band', 'y', 'x')
    """

    description = "Open Rumi rasters (files or URLs) lazily, in frame-aligned read groups"
    url = "https://github.com/asterisk-labs/rumi"
    open_dataset_parameters = (
        "filename_or_obj", "drop_variables", "mask_and_scale", "decode_times",
        "decode_timedelta", "use_cftime", "concat_characters", "decode_coords", "lock",
        "band_as_variable", "header", "storage_options", "nodata", "scale_factor",
        "add_offset", "units", "sidecar", "overview_level")

    def open_dataset(
            self, filename_or_obj: Any, *,
            drop_variables: str | Iterable[str] | None = None,
            mask_and_scale: bool | None = None, decode_times: bool | None = None,
            decode_timedelta: bool | None = None, use_cftime: bool | None = None,
            concat_characters: bool | None = None, decode_coords: bool | str | None = None,
            lock: Any = None, band_as_variable: bool = False, header: bytes | None = None,
            storage_options: dict[str, Any] | None = None, nodata: Any = None,
            scale_factor: float | None = None, add_offset: float | None = None,
            units: str | None = None, sidecar: bool | str | os.PathLike[str] | None = None,
            overview_level: int | None = None,
    ) -> Any:
        """Open a Rumi source; see :func:`rumi_xarray.open_dataset` for the keywords."""
        from rumi_xarray.backend.open import open_rumi

        return open_rumi(
            filename_or_obj, drop_variables=drop_variables, mask_and_scale=mask_and_scale,
            decode_times=decode_times, decode_timedelta=decode_timedelta,
            use_cftime=use_cftime, concat_characters=concat_characters,
            decode_coords=decode_coords, band_as_variable=band_as_variable, header=header,
            storage_options=storage_options, nodata=nodata, scale_factor=scale_factor,
            add_offset=add_offset, units=units, sidecar=sidecar,
            overview_level=overview_level)

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Recognise ``.rumi`` paths and URLs (no network request) or the magic bytes."""
        if isinstance(filename_or_obj, (bytes, bytearray, memoryview)):
            return bytes(filename_or_obj[:4]) == MAGIC
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        return isinstance(path, str) and _looks_like_rumi(path)

    def open_groups_as_dict(self, filename_or_obj: Any, **kwargs: Any) -> dict[str, Any]:
        """Return the file as one group: a Rumi file holds a single raster cube.

        Parameters
        ----------
        filename_or_obj : str, os.PathLike, bytes-like or file-like
        **kwargs
            As for :meth:`open_dataset`.

        Returns
        -------
        dict
            ``{"/": dataset}``.
        """
        return {"/": self.open_dataset(filename_or_obj, **kwargs)}

    def open_datatree(self, filename_or_obj: Any, **kwargs: Any) -> Any:
        """Return a DataTree whose root holds the file's one cube (as ``open_groups_as_dict``)."""
        from xarray import DataTree

        return DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))
