"""From a click on the explorer's map to the pixel's series plotted, against rioxarray.

Run: ``.venv/bin/python benchmarks/explore_click.py [--dates 24] [--size 1024] [--reps 5]
[--latency-ms 20] [--data-dir DIR]``.

Data: ``--dates`` Landsat-like scenes (3 bands of uint16, ``--size`` pixels
square, deflate GeoTIFFs tiled 256 written by GDAL, as ``benchmarks/ingest.py``
makes them), turned into Rumi scene files plus their catalog by ``rx.ingest``
(512-pixel tiles, one frame per band and tile) and into COGs (ZSTD, 512-pixel
tiles) by GDAL's COG driver. Every file is served by the loopback HTTP server
of ``benchmarks/httpserve.py`` with ``--latency-ms`` per request.

Each arm starts, untimed, where a notebook user is when they click: the cube
open over HTTP. The timed part is the click: from the event to the pixel's
series figure rendered to PNG.

- ``ours``: ``rx.open_catalog(table)`` of the scene files' URLs, then
  ``ds.rumi.explore()`` (which draws the first date's map), then
  ``rx.clear_cache()``; timed: the explorer's click handler with the event
  ipyevents sends for the pixel (``Explorer.handle_event``), which reads the
  series and renders the series figure (matplotlib, Agg) to PNG.
- ``rio ...``: the same dates as GeoTIFFs (``cog``: the COGs; ``gtiff``: the
  deflate GeoTIFFs), opened as a rioxarray user does,
  ``xr.concat([rioxarray.open_rasterio(url, ...) for url in urls], dim=time)``;
  timed: ``cube.isel(x=col, y=row).values`` and the same series figure (the
  explorer's size and elements) rendered to PNG the same way. Five ways to
  open: ``lazy`` (lazily indexed, no dask: ``xr.concat`` would load the whole
  cube at open, so one DataArray per date is kept and the click reads the
  pixel of each, date by date), ``dask``
  (``chunks={}``, dask's threaded scheduler, rioxarray's default lock, which
  serializes reads), ``dask nolock`` (``chunks={}, lock=False``: parallel
  reads, each thread with its own dataset) and ``dask blocks`` (``lock=False``
  and chunks of the files' own blocks: a chunk is one block, so the pixel's
  chunk is all a date reads, whatever dask fuses), the last also with as
  many threads as dates (``dask blocks threads``: dask's ``num_workers``,
  every date's request in flight at once, as a user tuning for latency would
  set it). The fastest rioxarray arm is the reference.

Every round picks a new pixel (outside the scenes' nodata edge) and every arm
opens its files afresh (a new query string on the GeoTIFFs' URLs, so that
neither GDAL's /vsicurl/ cache nor its block cache holds the pixel; a cleared
tile cache for ours): each click really reads, every date. Rounds are
interleaved: a warm-up round, whose series are checked against each other,
then ``--reps`` rounds. Printed per arm: medians of the click's wall time, of
its read (ours: the explorer's own reading of it; rioxarray: the ``.values``),
of the rest (building and rendering the figure), CPU time, native calls
(``rx.stats()``), the HTTP requests and bytes the server answered for the
click, and for information the untimed open's wall time.

GDAL's HTTP settings are the ones ``benchmarks/pixel_series.py`` uses
(``GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR``,
``CPL_VSIL_CURL_ALLOWED_EXTENSIONS=.tif``, ``VSI_CACHE=FALSE``).

Bar (exit status 1 when missed): ours is faster than the fastest rioxarray arm.
"""

from __future__ import annotations

import argparse
import io
import os
import runpy
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
#: The three bands (no common names: shown as an RGB composite), each a line of the series.
BANDS = ("1", "2", "3")
#: How the rioxarray arms open the GeoTIFFs (see the module docstring).
MODES = ("lazy", "dask", "dask nolock", "dask blocks", "dask blocks threads")
#: CSS width of the explorer's map (its default ``size``): where a click falls in it.
MAP_CSS = 512


# --- a click, as each arm answers it -----------------------------------------------------


class Click:
    """One arm's click, ready to run: the cube is open (untimed), ``run`` is timed.

    Attributes
    ----------
    run : callable
        The click: returns the ``(time, band)`` series read (the figure is
        rendered to PNG on the way).
    read_seconds : callable
        After ``run``: the wall time of its read alone.
    opened : float
        Wall time of the untimed open.
    close : callable
        Untimed, after ``run``: let go of what the open made.
    """

    def __init__(self, run: Callable[[], np.ndarray], read_seconds: Callable[[], float],
                 opened: float, close: Callable[[], None] = lambda: None) -> None:
        self.run, self.read_seconds, self.opened = run, read_seconds, opened
        self.close = close


def ours(table: Path, row: int, col: int) -> Click:
    """Open the catalog cube and its explorer; the click goes through ``handle_event``."""
    import rumi_xarray as rx

    start = time.perf_counter()
    ex = rx.open_catalog(table).rumi.explore(band=BANDS)
    opened = time.perf_counter() - start
    rx.clear_cache()  # the map's tiles of the first date: the click must read them again
    g = ex.grid
    if (g.step, g.row, g.col) != (1, 0, 0):
        raise AssertionError(f"the map is not the full-resolution image: {g}")
    # What ipyevents reports for a click at the centre of map sample (row, col) in an image
    # shown MAP_CSS pixels wide.
    scale = MAP_CSS / max(g.height, g.width)
    event = {"event": "click", "relativeX": (col + 0.5) * scale,
             "relativeY": (row + 0.5) * scale, "boundingRectWidth": g.width * scale,
             "boundingRectHeight": g.height * scale}

    def run() -> np.ndarray:
        ex.handle_event(event)
        if ex.pixel != (row, col) or not bytes(ex.series_image.value).startswith(b"\x89PNG"):
            raise AssertionError(f"the click selected {ex.pixel}, not {(row, col)}")
        assert ex.series is not None
        return np.asarray(ex.series.values)

    def read_seconds() -> float:
        assert ex.series_reading is not None
        return ex.series_reading.seconds

    def close() -> None:
        # ipywidgets keeps every widget it made until closed, and the explorer's own
        # widgets hold it (their callbacks), with its map: a round's explorer goes.
        import ipywidgets

        ipywidgets.Widget.close_all()

    return Click(run, read_seconds, opened, close)


def series_png(times: np.ndarray, values: np.ndarray, names: list[str], t: int, row: int,
               col: int, x: float, y: float) -> bytes:
    """Draw the explorer's series figure (same size, elements and renderer) to PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for k, (name, colour) in enumerate(zip(names, ("tab:red", "tab:green", "tab:blue"),
                                           strict=False)):
        ax.plot(times, values[:, k], marker="o", markersize=4, linewidth=1.2, color=colour,
                label=name)
    ax.axvline(times[t], color="0.4", linestyle="--", linewidth=1)
    ax.set(title=f"Pixel row {row}, column {col} (x={x:.10g}, y={y:.10g})", xlabel="date",
           ylabel="band_data")
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    for label in ax.get_xticklabels():
        label.set_rotation(30)
        label.set_horizontalalignment("right")
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def rio(urls: list[str], times: np.ndarray, row: int, col: int, mode: str,
        block: tuple[int, int]) -> Click:
    """Open the GeoTIFFs as a rioxarray user does; the click reads the pixel and plots it."""
    import pandas as pd
    import rioxarray
    import xarray as xr

    start = time.perf_counter()
    if mode == "lazy":
        # xr.concat loads arrays that dask does not hold (the whole cube, at open): a user
        # who stays lazy without dask keeps one DataArray per date and indexes each.
        dates = [rioxarray.open_rasterio(u) for u in urls]
    else:
        # "dask blocks" (and "... threads"): one chunk per block of the file.
        kwargs: dict[str, Any] = {
            "dask": {"chunks": {}},
            "dask nolock": {"chunks": {}, "lock": False},
        }.get(mode, {"chunks": {"y": block[0], "x": block[1]}, "lock": False})
        cube = xr.concat([rioxarray.open_rasterio(u, **kwargs) for u in urls],
                         dim=pd.Index(times, name="time"))
    opened = time.perf_counter() - start
    took = [0.0]

    def run() -> np.ndarray:
        start = time.perf_counter()
        if mode == "lazy":
            pixels = [da.isel(x=col, y=row) for da in dates]
            values = np.stack([p.values for p in pixels])
            x, y = float(pixels[0]["x"]), float(pixels[0]["y"])
        else:
            import dask

            # "threads": as many as dates, so every date's request waits at once.
            workers = len(urls) if mode == "dask blocks threads" else None
            pixel = cube.isel(x=col, y=row)
            with dask.config.set(num_workers=workers):
                values = pixel.transpose("time", "band").values
            x, y = float(pixel["x"]), float(pixel["y"])
        took[0] = time.perf_counter() - start
        # The nodata the files declare, masked as the explorer's decoded values are.
        decoded = np.where(values == 0, np.nan, values.astype(np.float32))
        series_png(times, decoded, list(BANDS), 0, row, col, x, y)
        return decoded

    return Click(run, lambda: took[0], opened)


# --- runs --------------------------------------------------------------------------------


def measure(arms: dict[str, Callable[[int, int], Click]], pixels: np.ndarray, server: Any
            ) -> dict[str, dict[str, float]]:
    """Interleave the arms: a checked warm-up round (pixel 0), then one round per pixel."""
    import rumi_xarray as rx

    results: dict[str, list[dict[str, float]]] = {k: [] for k in arms}
    names = list(arms)
    for rnd, (row, col) in enumerate(pixels):
        first: np.ndarray | None = None
        # Each round starts with another arm: none always follows the same neighbour on a
        # shared machine whose load drifts.
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            click = arms[name](int(row), int(col))
            rx.stats(reset=True)
            server.reset()
            wall, cpu = time.perf_counter(), time.process_time()
            got = click.run()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            st = server.stats()
            read = click.read_seconds()
            click.close()
            if first is None:
                first = got
            elif not np.array_equal(got, first, equal_nan=True):
                raise AssertionError(f"{name} differs from the round's first arm at pixel "
                                     f"({row}, {col})")
            if rnd == 0:
                continue
            results[name].append({"wall": wall, "read": read, "rest": wall - read, "cpu": cpu,
                                  "calls": rx.stats()["calls"], "requests": st["requests"],
                                  "bytes": st["bytes"], "open": click.opened})
    return {k: {f: statistics.median(r[f] for r in v) for f in v[0]}
            for k, v in results.items()}


def table_lines(res: dict[str, dict[str, float]], reference: str) -> list[str]:
    ref = res[reference]
    width = max(len(k) for k in res)
    lines = [f"{'arm':<{width}} {'click s':>8} {'read s':>7} {'rest s':>7} {'cpu s':>7} "
             f"{'x ref':>6} {'read x':>7} {'calls':>6} {'requests':>9} {'MiB':>7} {'open s':>7}"]
    for name, m in res.items():
        lines.append(f"{name:<{width}} {m['wall']:8.3f} {m['read']:7.3f} {m['rest']:7.3f} "
                     f"{m['cpu']:7.3f} {m['wall'] / ref['wall']:6.2f} "
                     f"{m['read'] / ref['read']:7.2f} "
                     f"{int(m['calls']) if name == 'ours' else '':>6} "
                     f"{int(m['requests']):9d} {m['bytes'] / 2**20:7.2f} {m['open']:7.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dates", type=int, default=24)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the data here and reuse it when present (default: a "
                             "temporary folder, removed)")
    args = parser.parse_args(argv)
    outfile = runpy.run_path(str(HERE / "outfile.py"))
    httpserve = outfile["bench_module"]("httpserve")
    # Its data (without the series file), its GDAL settings and its catalog of URLs.
    pixel_series = outfile["bench_module"]("pixel_series")
    for key, value in pixel_series.GDAL_HTTP.items():
        os.environ.setdefault(key, value)
    import matplotlib
    import rasterio
    import rioxarray
    import rumi

    import rumi_xarray as rx

    root = args.data_dir or Path(tempfile.mkdtemp(prefix="rumi-explore-click-"))
    stamp = root / f"made-{args.dates}x{args.size}"
    try:
        if not stamp.exists():
            shutil.rmtree(root, ignore_errors=True)
            pixel_series.prepare(root, args.dates, args.size, series=False)
            stamp.touch()
        cogs = sorted(p.name for p in (root / "cog").glob("*.tif"))
        tile = int(rumi.info(source=str(next((root / "scene").glob("*.rumi")))).tile[0])
        with rasterio.open(root / "cog" / cogs[0]) as src:
            cog_block = src.block_shapes[0]
        with rasterio.open(root / "src" / cogs[0]) as src:
            gtiff_block = src.block_shapes[0]
        times = rx.open_catalog(root / "scene" / "catalog.parquet")["time"].values
        # Away from the nodata edge the scenes carry (the first size/16 columns).
        rng = np.random.default_rng(3)
        pixels = np.stack([rng.integers(0, args.size, args.reps + 1),
                           rng.integers(args.size // 16, args.size, args.reps + 1)], axis=1)
        with httpserve.ServerProcess(root, latency_ms=args.latency_ms) as server:
            table = pixel_series.url_table(root, server.base_url)
            run = iter(range(10**6))

            def urls(folder: str) -> list[str]:
                # A fresh URL per open: GDAL's /vsicurl/ caches what it read per URL.
                k = next(run)
                return [f"{server.base_url}/{folder}/{n}?run={k}" for n in cogs]

            arms: dict[str, Callable[[int, int], Click]] = {
                "ours": lambda r, c: ours(table, r, c)}
            for folder, kind, block in (("cog", "cog", cog_block),
                                        ("src", "gtiff", gtiff_block)):
                for mode in MODES:
                    arms[f"rio {kind} {mode}"] = (
                        lambda r, c, folder=folder, mode=mode, block=block: rio(
                            urls(folder), times, r, c, mode, block))
            res = measure(arms, pixels, server)
        rio_arms = {k: v for k, v in res.items() if k.startswith("rio")}
        best = min(rio_arms, key=lambda k: rio_arms[k]["wall"])
        ratio = res["ours"]["wall"] / res[best]["wall"]
        ok = ratio < 1.0
        import dask
        import dask.system

        lines = [f"click to plotted series (PNG) on {args.dates} dates x 3 bands of "
                 f"{args.size}^2 uint16 scenes over HTTP ({args.latency_ms:g} ms per request, "
                 f"loopback); Rumi tiles {tile}, COG blocks {cog_block[0]}x{cog_block[1]}, "
                 f"deflate GeoTIFF blocks {gtiff_block[0]}x{gtiff_block[1]}",
                 f"rx {rx.__version__}, rumi {rumi.__version__} ({rumi.get_num_threads()} "
                 f"native threads), rioxarray {rioxarray.__version__}, GDAL "
                 f"{rasterio.__gdal_version__}, dask {dask.__version__} (threaded scheduler, "
                 f"{dask.system.CPU_COUNT} threads by default), matplotlib "
                 f"{matplotlib.__version__}; median of {args.reps} interleaved rounds (a new "
                 f"pixel and freshly opened files each) after a checked warm-up",
                 "", *table_lines(res, best), "",
                 "click s: the click to the PNG; read s: its read; rest s: the rest, mostly "
                 "the series figure; x ref, read x: click and read time / those of the "
                 "fastest rioxarray arm; calls: native read calls; requests, MiB: what the "
                 "server answered during the click; open s: the untimed open (ours: the "
                 "explorer's first map too)", "",
                 f"ours / {best} = {ratio:.2f} (bar < 1) -> {'PASS' if ok else 'FAIL'} "
                 f"(read alone {res['ours']['read'] / res[best]['read']:.2f}); requests "
                 f"{int(res['ours']['requests'])} vs {int(res[best]['requests'])}"]
        outfile["save"]("explore-click", lines, argv)
        return 0 if ok else 1
    finally:
        if args.data_dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
