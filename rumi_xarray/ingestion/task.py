"""One ingest task, as a worker runs it: sources in, one Rumi file and its catalog row out.

:func:`run_task` is a module-level function of plain picklable arguments, so
dask.distributed and process pools ship it by reference. It reads its
sources through rioxarray (GDAL) or xarray, writes the output with
:func:`rumi_xarray.to_rumi` (atomically: no partial file is ever visible
under the final name), optionally reads it back to compare, and returns an
:class:`Outcome` holding the output's catalog row and its provenance.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions import attributes
from rumi_xarray.errors import RumiCatalogError, RumiError, RumiWriteError
from rumi_xarray.ingestion.plan import Input, Step, Task
from rumi_xarray.sources.redact import redact

#: Catalog columns an ingest adds to each row (names starting with ``_`` are not
#: read as coordinates by ``open_catalog``).
PROVENANCE = ("_ingest_key", "_ingest_sources", "_ingest_origins", "_ingest_params",
              "_ingest_bytes_in", "_ingest_bytes_out", "_ingest_at")


@dataclass(frozen=True)
class Outcome:
    """What one task did: its output's catalog row, or why it failed.

    Parameters
    ----------
    output : str
    key : str
        The task's key (sources and parameters digest).
    row : dict or None
        The output's catalog row with the provenance columns (:data:`PROVENANCE`).
    bytes_in, bytes_out : int
        Source bytes read; bytes written (file and sidecar).
    seconds : float
        Time the task took in its worker.
    cpu_seconds : float
        CPU time the worker process spent on it (all its threads).
    verified : bool or None
        Whether the output was read back and compared (None: not asked).
    error : str or None
        The error's type and message when the task failed.
    """

    output: str
    key: str
    row: dict[str, Any] | None
    bytes_in: int
    bytes_out: int
    seconds: float
    verified: bool | None = None
    error: str | None = None
    cpu_seconds: float = 0.0


def run_task(task: Task, verify: bool = False) -> Outcome:
    """Make one output: read its sources, write the Rumi file, return its catalog row.

    Parameters
    ----------
    task : Task
    verify : bool, default False
        Read the output back and compare values, grid and nodata with the
        sources; a difference raises :class:`~rumi_xarray.errors.RumiWriteError`.

    Returns
    -------
    Outcome

    Raises
    ------
    RumiError
        Bad input (a missing or corrupt source, sources on different grids),
        named with the output and the Item or file it came from. The
        executor retries, then records it; the run goes on.
    """
    from rumi_xarray.catalogs.table import catalog
    from rumi_xarray.write.to_rumi import to_rumi

    started, cpu = time.perf_counter(), time.process_time()
    steps = [_step_array(step, task.params) for step in task.steps]
    _same_grid(steps, task)
    times = [_time(step, array) for step, array in zip(task.steps, steps, strict=True)]
    data = xr.concat(steps, dim="time", join="exact", combine_attrs="drop_conflicts") \
        if len(steps) > 1 else steps[0].expand_dims("time")
    if len(steps) > 1:  # what the dates agree on, as a catalog of them would show
        data.encoding[attributes.BANDS_ENCODING] = attributes.combined_bands(
            attributes.band_attributes(s) for s in steps)
    data = data.drop_vars("time", errors="ignore")
    try:
        to_rumi(data, task.output, time=times, tile_size=int(task.params["tile_size"]),
                codec=str(task.params["codec"]), frame=str(task.params["frame"]),
                progress=False, overviews=task.params.get("overviews"),
                overview_resampling=str(task.params.get("overview_resampling", "average")))
    except RumiError as exc:
        raise type(exc)(f"{task.name} (from {', '.join(task.origins)}): {exc}") from exc
    verified = None
    if verify:
        _verify(task.output, data)
        verified = True
    row = {str(k): v for k, v in catalog([task.output], max_workers=1).iloc[0].items()}
    from rumi_xarray.write.overviews import written_files

    bytes_out = sum(os.path.getsize(p) for p in written_files(task.output))
    bytes_in = sum(s.size or 0 for s in task.stamps)
    from rumi_xarray.ingestion.plan import now_iso

    row.update({
        "_ingest_key": task.key,
        "_ingest_sources": json.dumps([asdict(s) for s in task.stamps]),
        "_ingest_origins": json.dumps(task.origins),
        "_ingest_params": json.dumps(dict(task.params), sort_keys=True),
        "_ingest_bytes_in": bytes_in,
        "_ingest_bytes_out": bytes_out,
        "_ingest_at": now_iso(),
    })
    return Outcome(task.output, task.key, row, bytes_in, bytes_out,
                   time.perf_counter() - started, verified,
                   cpu_seconds=time.process_time() - cpu)


def _time(step: Step, array: xr.DataArray) -> Any:
    """Return a step's time: the planned one, else the file's own (its tags, a time coordinate)."""
    if step.time:
        return tuple(step.time) if isinstance(step.time, tuple | list) else step.time
    if "time" in array.coords and array["time"].size == 1:
        return array["time"].values.reshape(-1)[0]
    raise RumiCatalogError(f"{step.origin}: has no time (no TIFFTAG_DATETIME tag, no time "
                           f"coordinate); give time= a regular expression on the file names "
                           f"or one time per file")


def _open(inp: Input, tile_size: int, origin: str) -> xr.DataArray:
    """Open one input's file and select its band(s), loaded into memory."""
    from rumi_xarray.write.sources import open_source

    try:
        obj = open_source(inp.href, tile_size=tile_size, chunked=False)
    except RumiError as exc:
        raise type(exc)(f"{origin}: {exc}") from exc
    except Exception as exc:  # rasterio's and GDAL's errors: a corrupt or unreadable file
        raise RumiCatalogError(f"{origin}: cannot read {redact(inp.href)}: "
                               f"{type(exc).__name__}: {' '.join(str(exc).split())}") from exc
    if isinstance(obj, xr.Dataset):
        names = [n for n in obj.data_vars if {"x", "y"} <= set(obj[n].dims)
                 or {"lon", "lat"} <= set(obj[n].dims)]
        if len(names) != 1:
            raise RumiCatalogError(f"{origin}: {redact(inp.href)} has {len(names)} raster "
                                   f"variables ({names}); ingest reads files of one")
        obj = obj[names[0]]
    if "time" in obj.dims and obj.sizes["time"] == 1:
        obj = obj.isel(time=0)
    da = obj if "band" in obj.dims else obj.expand_dims(band=[1])
    labels = [str(v) for v in da["band"].values]
    tags = attributes.band_attributes(da)
    if inp.band is not None:
        if inp.band > da.sizes["band"]:
            raise RumiCatalogError(f"{origin}: {redact(inp.href)} has {da.sizes['band']} "
                                   f"band(s), not band {inp.band}")
        da = da.isel(band=[inp.band - 1])
    elif inp.name is not None:
        if inp.name not in labels:
            raise RumiCatalogError(f"{origin}: {redact(inp.href)} has no band {inp.name!r} "
                                   f"(its bands: {labels})")
        da = da.isel(band=[labels.index(inp.name)])
    selected = [str(v) for v in da["band"].values]
    if inp.label is not None:
        # A multi-band asset: its key and each band's own label name the bands.
        da = da.assign_coords(band=[inp.label] if da.sizes["band"] == 1 else
                              [f"{inp.label}_{v}" for v in da["band"].values])
    try:
        loaded = da.load()
    except Exception as exc:
        raise RumiCatalogError(f"{origin}: cannot read {redact(inp.href)}: "
                               f"{type(exc).__name__}: {' '.join(str(exc).split())}") from exc
    out = loaded.assign_coords(band=[str(v) for v in loaded["band"].values])
    # Each band's tags follow it to its new label (conventions/attributes).
    out.encoding[attributes.BANDS_ENCODING] = attributes.relabelled(
        tags, selected, [str(v) for v in out["band"].values])
    return out


def _step_array(step: Step, params: Mapping[str, Any]) -> xr.DataArray:
    """Return one time step as ``(band, y, x)``, its bands on one grid."""
    parts = [_open(inp, int(params["tile_size"]), step.origin) for inp in step.inputs]
    resolution = params.get("resolution")
    if resolution is not None:
        parts = _common_grid(parts, resolution, str(params.get("resampling") or "nearest"))
    first = parts[0]
    for inp, part in zip(step.inputs[1:], parts[1:], strict=True):
        if (part.sizes["y"], part.sizes["x"]) != (first.sizes["y"], first.sizes["x"]) or \
                part.rio.transform() != first.rio.transform() or part.rio.crs != first.rio.crs:
            raise RumiCatalogError(
                f"{step.origin}: {redact(inp.href)} is on another grid than "
                f"{redact(step.inputs[0].href)} ({part.sizes['y']}x{part.sizes['x']} at "
                f"{tuple(part.rio.transform())[:6]} against {first.sizes['y']}x"
                f"{first.sizes['x']} at {tuple(first.rio.transform())[:6]}); give the Items "
                f"proj:shape and proj:transform for one output per grid, or resolution= "
                f"for one common grid")
        if _nodata(part) != _nodata(first):
            raise RumiCatalogError(f"{step.origin}: {redact(inp.href)} has nodata "
                                   f"{_nodata(part)}, {redact(step.inputs[0].href)} "
                                   f"{_nodata(first)}; one Rumi file has one nodata")
    if len(parts) == 1:
        return first
    # Coordinates are equal (checked): exact alignment keeps rioxarray's arithmetic. The
    # files' attributes combine as catalogs combine scenes' (drop_conflicts), each band
    # keeps its own.
    stacked = xr.concat(parts, dim="band", join="override", combine_attrs="drop_conflicts")
    stacked.encoding[attributes.BANDS_ENCODING] = attributes.combined_bands(
        attributes.band_attributes(p) for p in parts)
    return stacked


def _nodata(da: xr.DataArray) -> Any:
    value = da.rio.nodata
    return None if value is None else (float("nan") if np.isnan(value) else float(value))


def _common_grid(parts: Sequence[xr.DataArray], resolution: Any, resampling: str
                 ) -> list[xr.DataArray]:
    """Reproject every part onto the grid of the first at ``resolution`` (rioxarray/GDAL)."""
    from rasterio.enums import Resampling  # type: ignore[import-untyped]

    try:
        method = Resampling[resampling]
    except KeyError:
        raise RumiCatalogError(f"resampling={resampling!r} is not one of "
                               f"{[m.name for m in Resampling]}") from None
    template = parts[0].rio.reproject(parts[0].rio.crs, resolution=resolution,
                                      resampling=method)
    return [template] + [p.rio.reproject_match(template, resampling=method)
                         for p in parts[1:]]


def _same_grid(steps: Sequence[xr.DataArray], task: Task) -> None:
    first = steps[0]
    for step, da in zip(task.steps[1:], steps[1:], strict=True):
        if da.shape != first.shape or da.rio.transform() != first.rio.transform() or \
                list(da["band"].values) != list(first["band"].values):
            raise RumiCatalogError(f"{task.name}: {step.origin} is not on the grid (or the "
                                   f"bands) of {task.steps[0].origin}; a series file stacks "
                                   f"dates of one grid")


def _verify(path: str, expected: xr.DataArray) -> None:
    """Read ``path`` back and compare it with what was written; raise on any difference."""
    with xr.open_dataset(path, engine="rumi", mask_and_scale=False) as ds:
        got = ds["band_data"]
        values = got.values
        problems = []
        if values.shape != expected.shape:
            problems.append(f"shape {values.shape} != {expected.shape}")
        elif not np.array_equal(values, expected.values, equal_nan=values.dtype.kind == "f"):
            problems.append("values differ")
        if got.rio.transform() != expected.rio.transform():
            problems.append(f"transform {tuple(got.rio.transform())[:6]} != "
                            f"{tuple(expected.rio.transform())[:6]}")
        if got.rio.crs != expected.rio.crs:
            problems.append(f"CRS {got.rio.crs} != {expected.rio.crs}")
        if _nodata(got) != _nodata(expected) and not (
                _nodata(got) is not None and _nodata(expected) is not None
                and np.isnan(_nodata(got)) and np.isnan(_nodata(expected))):
            problems.append(f"nodata {_nodata(got)} != {_nodata(expected)}")
    if problems:
        raise RumiWriteError(f"{path}: read back, it differs from its sources: "
                             f"{'; '.join(problems)}")
