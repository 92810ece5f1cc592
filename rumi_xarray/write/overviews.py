"""The overview levels of a file being written: each a Rumi file beside it.

GDAL keeps external overviews beside a raster (``<file>.ovr``); the Rumi
format has no overview field, so rumi_xarray does the same: level ``k`` of
``scene.rumi`` is the ordinary Rumi file ``scene.rumi.ovr<factor>`` (same
bands, times, sample type, CRS, tile size and frame layout; the transform
scaled as GDAL scales it), with its own sidecar, and the base file's sidecar
records every level (:class:`~rumi_xarray.conventions.sidecar.Overviews`).
The sizes and samples are GDAL's (:mod:`rumi_xarray.model.overviews`).

Levels are computed one ``(time, band)`` plane at a time, each level from the
previous one, from the samples the base file stores: the array itself when it
is in memory and stored losslessly, else the plane read back from the file
just written (a dask array is never held whole). The levels of every plane
are kept until their files are written (a third of the base's samples at
most).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rumi_xarray import progress as progress_bars
from rumi_xarray.conventions.georef import format_geotransform, parse_geotransform
from rumi_xarray.conventions.sidecar import (
    SIDECAR_SUFFIX,
    OverviewLevel,
    Overviews,
)
from rumi_xarray.model.cube import Scene
from rumi_xarray.model.overviews import (
    Level,
    is_level_file_of,
    level_file_name,
    level_transform,
    pyramid,
)
from rumi_xarray.native import reads

#: Writes one level: ``(path, samples (t, b, y, x), transform, geotransform)`` ->
#: ``(labels digest, header)``.
LevelWriter = Callable[[str, np.ndarray, "tuple[float, ...] | None", "str | None"],
                       "tuple[str, bytes]"]


def compute_levels(data: Any, dtype: np.dtype, stored: str | None, header: bytes | None,
                   levels: Sequence[Level], resampling: str, nodata: Any = None,
                   progress: bool | None = None) -> list[np.ndarray]:
    """Return the samples of every level, ``(time, band, y, x)`` each, largest first.

    Parameters
    ----------
    data : numpy.ndarray or dask.array.Array
        The base's ``(time, band, y, x)`` samples as written.
    dtype : numpy.dtype
        The stored sample type (native byte order).
    stored : str, optional
        The written base file, read back plane by plane when ``data`` is not
        an in-memory array of the stored samples (``None``: use ``data``).
    header : bytes, optional
        Its header.
    levels : sequence of Level
    resampling : {"average", "nearest"}
    nodata : number, optional
        Left out of averages.
    progress : bool, optional
        Show a bar (planes done).

    Returns
    -------
    list of numpy.ndarray
    """
    t, b, h, w = (int(n) for n in data.shape)
    out = [np.empty((t, b, lv.height, lv.width), dtype=dtype) for lv in levels]
    scene = None if stored is None else Scene(stored, bytes(header or b""))
    with progress_bars.bar(t * b, "overviews", unit="plane", show=progress) as advance:
        for ti in range(t):
            for bi in range(b):
                if scene is None:
                    plane = np.asarray(data[ti, bi], dtype=dtype)
                else:
                    plane = reads.read([(scene, 0, 0)], [ti], [bi], h, w, dtype)[0, 0, 0]
                for target, level in zip(out, pyramid(plane, levels, resampling, nodata),
                                         strict=True):
                    target[ti, bi] = level
                advance(1)
    return out


def write_levels(target: str, samples: Sequence[np.ndarray],
                 levels: Sequence[Level], resampling: str, *, base_shape: tuple[int, int],
                 transform: Sequence[float] | None, pixel_is_point: bool,
                 geotransform: str | None, write: LevelWriter) -> Overviews:
    """Write each level's file beside ``target``; return what the base's sidecar records.

    Parameters
    ----------
    target : str
        The base file's final path (levels are named after it).
    samples : sequence of numpy.ndarray
        :func:`compute_levels`.
    levels : sequence of Level
    resampling : str
    base_shape : (int, int)
        The base's ``(height, width)``.
    transform : sequence of float, optional
        The base's transform (rasterio order), scaled per level.
    pixel_is_point : bool
    geotransform : str, optional
        The base's sidecar ``GeoTransform`` (a grid without EPSG code), scaled per level.
    write : callable
        Writes one level file (``write_array`` with the base's labels and options).

    Returns
    -------
    Overviews
    """
    folder = os.path.dirname(os.path.abspath(target))
    base_name = os.path.basename(target)
    recorded = []
    for level, array in zip(levels, samples, strict=True):
        name = level_file_name(base_name, level.factor)
        level_tf = (None if transform is None else
                    level_transform(transform, base_shape, level.shape, pixel_is_point))
        level_gt = (None if geotransform is None else format_geotransform(
            level_transform(parse_geotransform(geotransform), base_shape, level.shape)))
        digest, header = write(os.path.join(folder, name), array, level_tf, level_gt)
        recorded.append(OverviewLevel(level.factor, name, level.height, level.width, digest,
                                      header))
    return Overviews(resampling, tuple(recorded))


def stale_levels(target: str, keep: Sequence[str]) -> list[str]:
    """Return the level files (and their sidecars) of ``target`` a new write no longer records.

    Only names :func:`~rumi_xarray.model.overviews.level_file_name` gives
    the file are considered, so nothing else in the folder is touched.

    Parameters
    ----------
    target : str
        The base file.
    keep : sequence of str
        The level file names the new sidecar records.

    Returns
    -------
    list of str
        Paths to remove.
    """
    folder = os.path.dirname(os.path.abspath(target))
    base_name = os.path.basename(target)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        level = name[:-len(SIDECAR_SUFFIX)] if name.endswith(SIDECAR_SUFFIX) else name
        if is_level_file_of(level, base_name) and level not in keep:
            found.append(os.path.join(folder, name))
    return sorted(found)


def remove_stale(target: str, keep: Sequence[str]) -> None:
    """Remove the level files of an earlier write that the new sidecar does not record.

    Parameters
    ----------
    target : str
    keep : sequence of str
    """
    for path in stale_levels(target, keep):
        try:
            os.remove(path)
        except OSError:
            continue  # a file another process removed, or cannot be removed: harmless


def written_files(target: str) -> list[str]:
    """Return the files a write of ``target`` made: it, its sidecar, its levels and theirs.

    Parameters
    ----------
    target : str

    Returns
    -------
    list of str
        Those that exist.
    """
    from rumi_xarray.conventions.sidecar import read_sidecar

    folder = os.path.dirname(os.path.abspath(target))
    levels = [os.path.join(folder, level.file) for level in read_sidecar(target).overviews.levels]
    candidates = [target, *levels]
    found = [p for p in candidates if os.path.exists(p)]
    found += [p + SIDECAR_SUFFIX for p in candidates if os.path.exists(p + SIDECAR_SUFFIX)]
    return found
