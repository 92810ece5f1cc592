"""Overview levels in catalog rows, and the level a requested resolution reads.

A catalog row records its file's overview levels in the column
:data:`COLUMN` (``overviews``): strict JSON text, null for a file without
levels, holding the resampling and, per level, what its sidecar records
(factor, file name, shape, labels digest) plus the level file's external
header, so that a cube at a level is built from the rows alone, with no
request, as a full-resolution one is.

``rx.open_catalog(..., resolution=...)`` (and the doors built on it) picks one
level for the whole cube by odc-stac's rule
(:func:`rumi_xarray.model.overviews.read_shrink`,
:func:`~rumi_xarray.model.overviews.pick_level`): the coarsest level whose
factor is not larger than the shrink the resolution allows. Each row is then
read as its level file: :func:`row_at_level` rewrites its path, header and
transform (and a sidecar ``geotransform``), after its digest was checked as
stored; the rewritten row has no digest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rumi_xarray.conventions import sidecar as sidecars
from rumi_xarray.conventions.digests import labels_digest
from rumi_xarray.conventions.facts import is_null
from rumi_xarray.conventions.georef import format_geotransform, parse_geotransform
from rumi_xarray.errors import RumiCatalogError, RumiIntegrityError
from rumi_xarray.model.overviews import (
    RESAMPLINGS,
    check_file_name,
    level_transform,
    pick_level,
    read_shrink,
)
from rumi_xarray.native import reads

#: The catalog column holding a row's overview levels (JSON text, or null).
COLUMN = "overviews"
#: The catalog column of a row's digest (``rumi_xarray.catalogs.table.ROW_DIGEST``).
_ROW_DIGEST = "row_digest"


def _cell(value: Any) -> Any:
    """Return a cell as a plain value, None for a null (as ``catalogs.table.cell``)."""
    return None if is_null(value) else value


@dataclass(frozen=True)
class CatalogLevel:
    """One overview level of a catalogued file.

    Attributes
    ----------
    factor : int
    file : str
        The level file's name, beside the row's file.
    height, width : int
    header : bytes
        The level file's external header.
    """

    factor: int
    file: str
    height: int
    width: int
    header: bytes


def column_text(overviews: sidecars.Overviews, source: Any) -> str | None:
    """Return the ``overviews`` cell of a file: its levels with their headers (None: none).

    The headers come from the sidecar (written with the levels), so nothing
    is read; a sidecar without them has each level file's metadata read (and
    its labels checked against the digest the sidecar recorded).

    Parameters
    ----------
    overviews : Overviews
        What the file's sidecar records.
    source : str or FsspecSource
        The resolved file.

    Returns
    -------
    str or None

    Raises
    ------
    RumiIntegrityError
        A level file's labels are not those recorded.
    """
    if not overviews:
        return None
    levels = []
    for level in overviews.levels:
        header = level.header
        if header is None:  # a sidecar without the levels' headers: read the level's
            target = sidecars.sibling(source, level.file)
            meta = reads.info(target)
            where = getattr(target, "url", target)
            if labels_digest(meta, str(where)) != level.labels_digest:
                raise RumiIntegrityError(f"{where}: its labels differ from those its base "
                                         f"file's sidecar recorded for overview level "
                                         f"{level.factor}")
            header = bytes(meta.header)
        levels.append({**level.to_json(), "header": header.hex()})
    return json.dumps({"resampling": overviews.resampling, "levels": levels},
                      sort_keys=True, separators=(",", ":"))


def resampling_of(value: Any) -> str | None:
    """Return the resampling an ``overviews`` cell records (None for a null cell)."""
    if _cell(value) is None:
        return None
    try:
        found = json.loads(value).get("resampling")
    except (ValueError, TypeError, AttributeError):
        return None
    return found if found in RESAMPLINGS else None


def parse(value: Any, where: str) -> tuple[CatalogLevel, ...]:
    """Return the levels of an ``overviews`` cell (none for a null cell).

    Parameters
    ----------
    value : str or None
    where : str
        The row, named in errors.

    Returns
    -------
    tuple of CatalogLevel

    Raises
    ------
    RumiCatalogError
        Not the JSON :func:`column_text` writes.
    """
    if _cell(value) is None:
        return ()
    try:
        content = json.loads(value) if isinstance(value, (str, bytes)) else None
        if not isinstance(content, Mapping) or content.get("resampling") not in RESAMPLINGS:
            raise ValueError("not an object with a resampling and levels")
        out = []
        for level in content["levels"]:
            parsed = sidecars.OverviewLevel.from_json(level)
            out.append(CatalogLevel(parsed.factor, check_file_name(parsed.file),
                                    parsed.height, parsed.width,
                                    bytes.fromhex(level["header"])))
        return tuple(out)
    except (ValueError, TypeError, KeyError) as exc:
        raise RumiCatalogError(f"{where}: the {COLUMN} column is not the JSON rx.catalog "
                               f"writes ({exc})") from None


def pixel_size(transform: Sequence[float]) -> tuple[float, float]:
    """Return the pixel size along x and y of a transform (rasterio order)."""
    a, b, _, d, e, _ = (float(v) for v in transform[:6])
    return math.hypot(a, d), math.hypot(b, e)


def choose(transform: Sequence[float] | None, factors: Sequence[int], resolution: Any,
           where: str) -> int | None:
    """Return the level a read at ``resolution`` uses (None: full resolution), as odc-stac.

    Parameters
    ----------
    transform : sequence of float or None
        The full resolution's transform.
    factors : sequence of int
        The levels' factors, increasing.
    resolution : float or (float, float)
        The pixel size asked for, in the CRS's units (odc-stac's ``resolution``).
    where : str

    Returns
    -------
    int or None

    Raises
    ------
    RumiCatalogError
        A resolution that is not one or two positive numbers, or scenes
        without a transform.

    Examples
    --------
    >>> choose((10.0, 0, 0, 0, -10.0, 0), [2, 4, 8], 45, "row 0")
    1
    >>> choose((10.0, 0, 0, 0, -10.0, 0), [2, 4, 8], 15, "row 0") is None
    True
    """
    try:
        values = [abs(float(v)) for v in (resolution if isinstance(resolution, (tuple, list))
                                          else (resolution, resolution))]
        if len(values) != 2 or not all(v > 0 and math.isfinite(v) for v in values):
            raise ValueError
    except (TypeError, ValueError):
        raise RumiCatalogError(f"resolution={resolution!r} is not a pixel size (a positive "
                               f"number, or (x, y))") from None
    if transform is None:
        raise RumiCatalogError(f"{where}: resolution= needs georeferenced scenes; this one "
                               f"has no transform")
    size_x, size_y = pixel_size(transform)
    return pick_level(read_shrink(min(values[0] / size_x, values[1] / size_y)), factors)


def row_at_level(row: Mapping[Any, Any], level: int, where: str) -> dict[Any, Any]:
    """Return a catalog row rewritten to read its overview level ``level``.

    Parameters
    ----------
    row : mapping
        The row as stored (its digest checked already).
    level : int
    where : str

    Returns
    -------
    dict
        ``path`` the level file (beside the row's), ``header`` its header,
        ``height``/``width`` and ``transform`` the level's, the digest null
        (the row no longer is the one recorded).

    Raises
    ------
    RumiCatalogError
        The row has no such level.
    """
    levels = parse(row.get(COLUMN), where)
    if not 0 <= level < len(levels):
        have = [lv.factor for lv in levels]
        raise RumiCatalogError(f"{where}: has no overview level {level} (its levels' factors: "
                               f"{have or 'none'}); every scene of a cube read at a "
                               f"resolution needs the same levels")
    chosen = levels[level]
    path = row.get("path")
    if not isinstance(path, str):
        raise RumiCatalogError(f"{where}: a file given as bytes has no overview files")
    out = dict(row)
    height, width = _cell(row.get("height")), _cell(row.get("width"))
    if height is None or width is None:
        meta = reads.header_info(bytes(row["header"]))
        height, width = int(meta.shape[-2]), int(meta.shape[-1])
    base, shape = (int(height), int(width)), (chosen.height, chosen.width)
    transform = _cell(row.get("transform"))
    if transform is not None:
        out["transform"] = list(level_transform(list(transform), base, shape,
                                                bool(_cell(row.get("pixel_is_point")))))
    geotransform = _cell(row.get("geotransform"))
    if isinstance(geotransform, str):  # a grid without EPSG code: GDAL's corner transform
        out["geotransform"] = format_geotransform(level_transform(
            parse_geotransform(geotransform, where), base, shape))
    out.update({"path": sidecars.sibling(path, chosen.file), "header": chosen.header,
                "height": chosen.height, "width": chosen.width, _ROW_DIGEST: None})
    return out


def factors_of(row: Mapping[Any, Any], where: str) -> list[int]:
    """Return the overview factors a catalog row records (``[]``: none)."""
    return [lv.factor for lv in parse(row.get(COLUMN), where)]
