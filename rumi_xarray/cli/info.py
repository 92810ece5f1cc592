"""``rumi-xarray info``: what a Rumi file holds (dimensions, coordinates, CRS, frames, size)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.cli.common import CommandError, add_command, human_size
from rumi_xarray.sources.location import locate


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``info`` subcommand to the parser."""
    info = add_command(
        commands, common, "info", run, help="describe a Rumi file or URL",
        description="Print dimensions, coordinates, CRS, transform, frame layout, tile size, "
                    "frame count, file size and compression ratio of a Rumi file.")
    info.add_argument("source", metavar="PATH_OR_URL")
    info.add_argument("--json", action="store_true", help="print one JSON object instead")


def describe(source: str) -> dict[str, Any]:
    """Return what a Rumi file holds, as plain Python values.

    Parameters
    ----------
    source : str
        Local path or URL.

    Returns
    -------
    dict
        ``source``, ``dims``, ``dtype``, ``coords`` (per coordinate: dims,
        dtype, first/last values), ``bands``, ``time_kind``, ``crs`` (EPSG
        code, the sidecar's WKT2 for a CRS without one, or None), ``crs_name``,
        ``transform`` (corner, rasterio order),
        ``pixel_is_point``, ``frame_layout``, ``index_order``, ``tile``,
        ``frames``, ``decoded_bytes``, ``frame_bytes`` (compressed frames),
        ``nodata``, ``scale_factor``, ``add_offset``, ``units`` (sidecar; as
        strict JSON spells them, NaN and infinities as ``"nan"``, ``"inf"``...),
        ``file_bytes`` (None when unknown, e.g. for URLs), ``ratio``
        (decoded bytes over file bytes, or over frame bytes without a size),
        and ``overviews``: the levels its sidecar records (``level``,
        ``factor``, ``file``, ``height``, ``width``), with
        ``overview_resampling``.
    """
    from rumi_xarray.backend import dataset
    from rumi_xarray.backend.open import open_scene
    from rumi_xarray.conventions import georef
    from rumi_xarray.conventions.facts import VALUE_COLUMNS
    from rumi_xarray.conventions.sidecar import read_sidecar
    from rumi_xarray.model.cube import Cube
    from rumi_xarray.model.grid import Grid
    from rumi_xarray.native import reads

    local = locate(source).local
    if local and not os.path.exists(source):
        raise CommandError(f"{source}: no such file")
    scene, meta = open_scene(source)
    grid = Grid.from_metadata(meta)
    labels = dataset.CubeLabels.from_metadata(meta, scene.name)
    found = read_sidecar(scene.source)
    spelled = found.facts.to_json()
    # The sidecar completes a CRS the format cannot hold (WKT2, and its grid).
    transform, crs, point = georef.with_sidecar(labels.transform, labels.crs,
                                                labels.pixel_is_point, found.georef(), scene.name)
    labels = dataset.CubeLabels(labels.bands, labels.seconds, labels.bounds, transform, crs, point)
    ds = dataset.build(Cube.single(scene, grid), labels)
    var = ds["band_data"]
    frame_bytes = sum(length for _, length in reads.plan_ranges(
        scene, None, None, 0, 0, grid.height, grid.width))
    decoded = int(np.prod(var.shape)) * grid.dtype.itemsize
    file_bytes = os.path.getsize(source) if local else None
    epsg = labels.crs if labels.georeferenced else None
    corner = (None if not labels.georeferenced or labels.transform is None
              else georef.corner_transform(labels.transform, bool(labels.pixel_is_point)))
    return {
        "source": source,
        "dims": {str(k): int(v) for k, v in var.sizes.items()},
        "dtype": str(var.dtype),
        "coords": {str(name): _coord_summary(c) for name, c in ds.coords.items()},
        "bands": list(labels.bands),
        "time_kind": "interval" if labels.bounds is not None else "instant",
        "crs": None if epsg is None else (epsg if isinstance(epsg, str) else int(epsg)),
        "crs_name": None if epsg is None else _crs_name(epsg),
        "transform": None if corner is None else list(corner),
        "pixel_is_point": bool(labels.pixel_is_point) and labels.georeferenced,
        **{k: spelled.get(k) for k in VALUE_COLUMNS},
        "frame_layout": str(meta.frame_layout),
        "index_order": list(meta.index_order),
        "tile": [int(v) for v in meta.tile],
        "frames": int(meta.frames),
        "decoded_bytes": decoded,
        "frame_bytes": int(frame_bytes),
        "file_bytes": file_bytes,
        "ratio": decoded / (file_bytes or frame_bytes or 1),
        "overviews": [{"level": k, "factor": lv.factor, "file": lv.file, "height": lv.height,
                       "width": lv.width} for k, lv in enumerate(found.overviews.levels)],
        "overview_resampling": found.overviews.resampling if found.overviews else None,
    }


def _coord_summary(coord: xr.DataArray) -> dict[str, Any]:
    summary: dict[str, Any] = {"dims": [str(d) for d in coord.dims], "dtype": str(coord.dtype)}
    if coord.ndim == 1 and coord.size:
        values = coord.values
        summary.update(size=int(coord.size), first=_plain(values[0]), last=_plain(values[-1]))
    elif coord.ndim == 0:
        summary["value"] = _plain(coord.values[()])
    return summary


def _plain(value: Any) -> Any:
    """Return a JSON-friendly form of a coordinate value."""
    if isinstance(value, np.datetime64):
        return str(np.datetime_as_string(value, unit="s"))
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (int, float, str, bool)) else str(value)


def _crs_name(crs: int | str) -> str | None:
    try:
        from pyproj import CRS

        return str((CRS.from_epsg(crs) if isinstance(crs, int) else CRS.from_wkt(crs)).name)
    except Exception:  # a name is a nicety; the EPSG code is what matters
        return None


def format_info(facts: dict[str, Any]) -> str:
    """Return :func:`describe`'s facts as an aligned text block.

    Parameters
    ----------
    facts : dict

    Returns
    -------
    str
    """
    from rumi_xarray.conventions.facts import VALUE_COLUMNS

    dims = ", ".join(f"{k}: {v}" for k, v in facts["dims"].items())
    lines = [facts["source"], f"  dimensions   {dims}  ({facts['dtype']})"]
    lines.append("  coordinates")
    for name, c in facts["coords"].items():
        where = f"({', '.join(c['dims'])})" if c["dims"] else "scalar"
        if "first" in c:
            span = c["first"] if c["size"] == 1 else f"{c['first']} .. {c['last']}"
            lines.append(f"    {name:<12} {where:<10} {c['dtype']:<15} {span}")
        else:
            lines.append(f"    {name:<12} {where:<10} {c['dtype']:<15} {c.get('value', '')}")
    lines.append(f"  bands        {' | '.join(facts['bands'])}")
    lines.append(f"  time         {facts['time_kind']}s")
    if facts["crs"] is None:
        lines.append("  crs          none (not georeferenced)")
    else:
        name = f" ({facts['crs_name']})" if facts["crs_name"] else ""
        if isinstance(facts["crs"], str):  # no EPSG code: the sidecar's WKT2
            lines.append(f"  crs          {facts['crs_name']} (WKT2 in the sidecar)")
        else:
            lines.append(f"  crs          EPSG:{facts['crs']}{name}")
        kind = "PixelIsPoint" if facts["pixel_is_point"] else "PixelIsArea"
        coefficients = ", ".join(f"{v:.12g}" for v in facts["transform"])
        lines.append(f"  transform    ({coefficients})  corner origin, {kind}")
    tile = " x ".join(str(v) for v in facts["tile"])
    lines.append(f"  frames       {facts['frames']} of tile {tile}, layout "
                 f"'{facts['frame_layout']}', index order "
                 f"{' '.join(facts['index_order']) or '(one frame per tile)'}")
    denominator = "file" if facts["file_bytes"] is not None else "compressed frames"
    lines.append(f"  size         {human_size(facts['file_bytes'])} on disk, "
                 f"{human_size(facts['frame_bytes'])} of compressed frames, "
                 f"{human_size(facts['decoded_bytes'])} decoded")
    lines.append(f"  ratio        {facts['ratio']:.2f} (decoded / {denominator})")
    levels = facts.get("overviews") or []
    if levels:
        lines.append(f"  overviews    {len(levels)} level(s), {facts['overview_resampling']}"
                     f" (overview_level=0..{len(levels) - 1})")
        lines.extend(f"    {lv['level']}: factor {lv['factor']:<4} {lv['height']} x "
                     f"{lv['width']:<8} {lv['file']}" for lv in levels)
    else:
        lines.append("  overviews    none")
    known = {k: facts.get(k) for k in VALUE_COLUMNS if facts.get(k) is not None}
    if known:
        lines.append("  values       " + ", ".join(f"{k} {v}" for k, v in known.items())
                     + "  (from the sidecar)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray info``; return the exit code."""
    facts = describe(args.source)
    print(json.dumps(facts, indent=2) if args.json else format_info(facts))
    return 0


