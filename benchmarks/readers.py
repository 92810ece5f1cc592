"""The readers compared and the four workloads, as plain callables.

Each reader opens the cube the way its users would, inside the timed region
(opening is part of what a user pays, and over HTTP it is requests), and
returns a canonical numpy result so every reader can be checked against the
engine's ``rumi.read`` of the same data:

- W1 full: ``(time, band, y, x)``;
- W2 time mean: ``(band, y, x)`` float;
- W3 pixel series: ``(pixel, time, band)``;
- W4 chips: ``(chip, time, band, size, size)``;
- W6 chained-selection chip: ``(100, 100)`` of date 3, band 2, written as one
  ``isel`` and as the chains idiomatic code writes (issue 20).

The ``xr-tiles`` reader opens with tile-sized chunks (one frame per chunk), as
rioxarray and stackstac users write chunks (issue 20).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import rumi
import xarray as xr

import rumi_xarray as rx

PATTERN = "t b y x"  # explicit, so the output never depends on T


@dataclass(frozen=True)
class Location:
    """Where each encoding of the cube lives: local paths or loopback URLs.

    When ``remote``, the GeoTIFF opener appends ``?run=N`` (a query the server
    ignores) to every URL: GDAL's /vsicurl/ keeps a per-URL cache of file
    sizes and headers across opens in one process, which would make later
    repetitions cheaper than a fresh process's first read. librumi and fsspec
    keep nothing between runs (their request counts are identical run after
    run), so they need no such suffix.

    ``catalog`` is the table of the same cube split into one Rumi file per
    date (``rx.catalog`` of those files, paths or URLs), built once outside
    the timed region as a stored catalog would be.
    """

    rumi: str
    header: bytes
    zarr: str
    tifs: tuple[str, ...]
    dates: tuple[dt.date, ...]
    remote: bool
    catalog: Any = None


@dataclass(frozen=True)
class Queries:
    """The deterministic pixel and chip positions of W3 and W4."""

    pixels: tuple[np.ndarray, np.ndarray]
    chips: tuple[tuple[int, int], ...]
    chip_size: int

    @classmethod
    def make(cls, size: int, n_pixels: int, n_chips: int, chip_size: int,
             seed: int = 7) -> Queries:
        rng = np.random.default_rng(seed)
        rows = rng.integers(0, size, n_pixels)
        cols = rng.integers(0, size, n_pixels)
        corners = rng.integers(0, size - chip_size + 1, (n_chips, 2))
        return cls((rows, cols), tuple((int(r), int(c)) for r, c in corners), chip_size)


# --- openers: each yields the band_data DataArray and closes what it opened --------

Opener = Callable[[Location, int], Any]


@contextmanager
def open_rx_lazy(loc: Location, run: int) -> Iterator[xr.DataArray]:
    yield xr.open_dataset(loc.rumi, engine="rumi").band_data


@contextmanager
def open_xr_chunks(loc: Location, run: int) -> Iterator[xr.DataArray]:
    # The call the design card names first: xarray's own open with dask chunks.
    yield xr.open_dataset(loc.rumi, engine="rumi", chunks={}).band_data


@contextmanager
def open_xr_tiles(loc: Location, run: int) -> Iterator[xr.DataArray]:
    # One chunk per frame, as rioxarray and stackstac users write chunks. xarray
    # warns that they split the preferred chunks; that warning is not timed noise.
    import warnings

    tile = int(rumi.info(source=None, header=loc.header).tile[0])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The specified chunks separate")
        ds = xr.open_dataset(loc.rumi, engine="rumi",
                             chunks={"time": 1, "band": 1, "y": tile, "x": tile})
    yield ds.band_data


@contextmanager
def open_xr_auto(loc: Location, run: int) -> Iterator[xr.DataArray]:
    yield xr.open_dataset(loc.rumi, engine="rumi", chunks="auto").band_data


@contextmanager
def open_rx_chunks(loc: Location, run: int) -> Iterator[xr.DataArray]:
    yield rx.open_dataset(loc.rumi, chunks={}).band_data


@contextmanager
def open_rx_auto(loc: Location, run: int) -> Iterator[xr.DataArray]:
    yield rx.open_dataset(loc.rumi, chunks="auto").band_data


@contextmanager
def open_rx_catalog(loc: Location, run: int) -> Iterator[xr.DataArray]:
    # The same cube as one file per date, stacked from a catalog table.
    if loc.catalog is None:
        raise RuntimeError("no single-date scenes for this location")
    yield rx.open_catalog(loc.catalog, chunks={}).band_data


def open_rx_catalog_rows(rows: int) -> Opener:
    """Return an opener of the catalog in chunks of every scene x ``rows`` tile rows.

    An experiment for the read-group policy of catalogs: all time steps in a chunk (a
    time reduction completes inside each chunk) against whole scenes per chunk (one
    request per file on a full load, but time reductions combine partial sums).
    """

    @contextmanager
    def opener(loc: Location, run: int) -> Iterator[xr.DataArray]:
        if loc.catalog is None:
            raise RuntimeError("no single-date scenes for this location")
        tile = int(rumi.info(source=None, header=loc.header).tile[0])
        yield rx.open_catalog(loc.catalog, chunks={"time": -1, "band": -1, "y": rows * tile,
                                                    "x": -1}).band_data

    return opener


@contextmanager
def open_zarr(loc: Location, run: int) -> Iterator[xr.DataArray]:
    ds = xr.open_dataset(loc.zarr, engine="zarr", chunks={})
    try:
        yield ds.band_data
    finally:
        ds.close()


@contextmanager
def open_geotiff(loc: Location, run: int) -> Iterator[xr.DataArray]:
    import rioxarray

    suffix = f"?run={run}" if loc.remote else ""
    # chunks=512: one chunk per 512 tile with all 4 (pixel-interleaved) bands,
    # i.e. one TIFF block decode per chunk; lock=False: thread-local GDAL
    # handles, so the two dask threads really read in parallel.
    arrays = [rioxarray.open_rasterio(path + suffix, chunks=512, lock=False)
              for path in loc.tifs]
    try:
        yield xr.concat(arrays, dim=pd.Index(np.array(loc.dates, dtype="datetime64[ns]"),
                                             name="time"))
    finally:
        for a in arrays:
            a.close()


@contextmanager
def open_naive(loc: Location, run: int) -> Iterator[xr.DataArray]:
    """Yield the cube as a hand-written per-frame dask graph over ``rumi.read``.

    This is what a user without rumi_xarray would write (and what the bar's
    "naive per-chunk dask" number measured): one task and one native call per
    512 x 512 plane frame.
    """
    meta = rumi.info(source=loc.rumi, header=loc.header)
    t, b, ny, nx = (1, *meta.shape) if len(meta.shape) == 3 else meta.shape
    tile = int(meta.tile[0])
    chunks = ((1,) * t, (1,) * b, _split(ny, tile), _split(nx, tile))

    def block(block_info: dict[Any, Any] | None = None) -> np.ndarray:
        assert block_info is not None
        (t0, t1), (b0, b1), (y0, y1), (x0, x1) = block_info[None]["array-location"]
        return rumi.read(loc.rumi, loc.header, time=(t0, t1), bands=(b0, b1),
                         window=(y0, x0, y1 - y0, x1 - x0), pattern=PATTERN)

    data = da.map_blocks(block, chunks=chunks, dtype=np.dtype(meta.dtype.numpy_dtype),
                         meta=np.empty((0, 0, 0, 0), dtype=meta.dtype.numpy_dtype))
    yield xr.DataArray(data, dims=("time", "band", "y", "x"))


def reset_caches() -> None:
    """Empty rumi_xarray's process-wide decoded-tile cache before a run.

    Each timed run stands for a user's first read of the data, as for every
    other reader here (fresh GDAL handles, fsspec keeps no chunk cache).
    Within a run the cache works as designed: W3/W4 queries that share tiles
    decode them once, like GDAL's block cache does for the GeoTIFF reader.
    """
    rx.clear_cache()


def _split(n: int, tile: int) -> tuple[int, ...]:
    return tuple(min(tile, n - s) for s in range(0, n, tile))


# --- workloads over an opened DataArray -----------------------------------------------


def full(arr: xr.DataArray, q: Queries) -> np.ndarray:
    return np.asarray(arr.values)


def time_mean(arr: xr.DataArray, q: Queries) -> np.ndarray:
    return np.asarray(arr.mean("time").values)


def pixel_series(arr: xr.DataArray, q: Queries) -> np.ndarray:
    # One vectorized selection, the idiomatic xarray way to pull point series.
    rows, cols = q.pixels
    picked = arr.isel(y=xr.DataArray(rows, dims="p"), x=xr.DataArray(cols, dims="p"))
    return np.asarray(picked.transpose("p", "time", "band").values)


def chips(arr: xr.DataArray, q: Queries) -> np.ndarray:
    # One read per chip, as an ML data loader iterates samples.
    s = q.chip_size
    return np.stack([np.asarray(arr.isel(y=slice(r, r + s), x=slice(c, c + s)).values)
                     for r, c in q.chips])


#: W6: date 3, band 2, rows and columns 0-100 (the chip of issue 20).
CHAIN_TIME, CHAIN_BAND, CHAIN_SIZE = 3, 2, 100


def chain_one_isel(arr: xr.DataArray, q: Queries) -> np.ndarray:
    n = CHAIN_SIZE
    return arr.isel(time=CHAIN_TIME, band=CHAIN_BAND, y=slice(0, n), x=slice(0, n)).to_numpy()


def chain_sel_isel(arr: xr.DataArray, q: Queries) -> np.ndarray:
    n, band = CHAIN_SIZE, arr.band.values[CHAIN_BAND]
    return arr.sel(band=band).isel(time=CHAIN_TIME, x=slice(0, n), y=slice(0, n)).to_numpy()


def chain_isel_sel_isel(arr: xr.DataArray, q: Queries) -> np.ndarray:
    n, band = CHAIN_SIZE, arr.band.values[CHAIN_BAND]
    return arr.isel(time=CHAIN_TIME).sel(band=band).isel(x=slice(0, n),
                                                          y=slice(0, n)).to_numpy()


WORKLOADS: dict[str, Callable[[xr.DataArray, Queries], np.ndarray]] = {
    "full": full, "mean": time_mean, "pixels": pixel_series, "chips": chips,
    "chain": chain_one_isel,
}


# --- the engine itself (no xarray, no dask) -------------------------------------------


def engine_full(loc: Location, q: Queries) -> np.ndarray:
    return rumi.read(loc.rumi, loc.header, pattern=PATTERN)


def engine_mean(loc: Location, q: Queries) -> np.ndarray:
    return engine_full(loc, q).mean(axis=0)


def engine_pixels(loc: Location, q: Queries) -> np.ndarray:
    # Point by point, as the engine's API offers it: each call decodes every
    # frame holding the pixel (T x B plane frames).
    rows, cols = q.pixels
    return np.stack([rumi.read(loc.rumi, loc.header, window=(int(r), int(c), 1, 1),
                               pattern=PATTERN)[:, :, 0, 0] for r, c in zip(rows, cols,
                                                                            strict=True)])


def engine_chips(loc: Location, q: Queries) -> np.ndarray:
    s = q.chip_size
    return np.stack([rumi.read(loc.rumi, loc.header, window=(r, c, s, s), pattern=PATTERN)
                     for r, c in q.chips])


def engine_chain(loc: Location, q: Queries) -> np.ndarray:
    n = CHAIN_SIZE
    return rumi.read(loc.rumi, loc.header, time=[CHAIN_TIME], bands=[CHAIN_BAND],
                     window=(0, 0, n, n), pattern=PATTERN)[0, 0]


ENGINE: dict[str, Callable[[Location, Queries], np.ndarray]] = {
    "full": engine_full, "mean": engine_mean, "pixels": engine_pixels, "chips": engine_chips,
    "chain": engine_chain,
}


def scenes_full(loc: Location, q: Queries) -> np.ndarray:
    """Read every single-date file in one ``rumi.read_many`` (one plan, as a catalog needs).

    The engine limit for the catalog reader: one file per date means at least one
    request per file, which one read of the whole cube does not pay.
    """
    table = loc.catalog
    out = rumi.read_many(list(table["path"]), [bytes(h) for h in table["header"]],
                         pattern="n t b y x")
    return out.reshape((-1, *out.shape[2:]))


ENGINE_SCENES: dict[str, Callable[[Location, Queries], np.ndarray]] = {
    "full": scenes_full, "mean": lambda loc, q: scenes_full(loc, q).mean(axis=0),
}


@dataclass(frozen=True)
class Reader:
    """One contestant: a label and how it opens the cube."""

    key: str
    label: str
    opener: Opener | None  # None: the engine itself
    workloads: Sequence[str]
    default: bool = True  # False: only run when named in --readers
    work: Callable[[xr.DataArray, Queries], np.ndarray] | None = None  # else WORKLOADS[w]


ALL = ("full", "mean", "pixels", "chips")
READERS = (
    Reader("engine", "rumi.read (engine)", None, (*ALL, "chain")),
    Reader("engine-scenes", "rumi.read_many of the scenes", None, ("full", "mean")),
    Reader("rx-lazy", "xr engine=rumi, lazy", open_rx_lazy, (*ALL, "chain")),
    Reader("xr-chunks", "xr engine=rumi chunks={}", open_xr_chunks, (*ALL, "chain")),
    Reader("xr-chain-sel", "chunks={} .sel(band).isel(...)", open_xr_chunks, ("chain",),
           work=chain_sel_isel),
    Reader("xr-chain-isel", "chunks={} .isel(t).sel(b).isel()", open_xr_chunks, ("chain",),
           work=chain_isel_sel_isel),
    Reader("xr-tiles", "xr engine=rumi tile chunks", open_xr_tiles, ("full", "mean")),
    Reader("xr-auto", "xr engine=rumi chunks=auto", open_xr_auto, ALL),
    Reader("rx-chunks", "rx.open_dataset chunks={}", open_rx_chunks, ALL),
    Reader("rx-auto", "rx.open_dataset chunks=auto", open_rx_auto, ALL),
    Reader("rx-catalog", "rx.open_catalog chunks={}", open_rx_catalog, ALL),
    Reader("rx-catalog-rows1", "rx.open_catalog all x 1 tile row", open_rx_catalog_rows(1),
           ("full", "mean"), default=False),
    Reader("rx-catalog-rows2", "rx.open_catalog all x 2 tile rows", open_rx_catalog_rows(2),
           ("full", "mean"), default=False),
    Reader("naive", "naive dask over rumi.read", open_naive, ("full", "mean"), default=False),
    Reader("zarr", "Zarr v3 (xarray+dask)", open_zarr, ALL),
    Reader("geotiff", "GeoTIFF (rioxarray)", open_geotiff, ALL),
)
#: The dask-backed rumi_xarray paths the bar of issue 11 applies to.
DASK_PATHS = ("xr-chunks", "xr-auto", "rx-chunks", "rx-auto", "rx-catalog")


def task(reader: Reader, workload: str, loc: Location, q: Queries) -> Callable[[int], np.ndarray]:
    """Return the timed callable for one reader and workload; its argument is the run."""
    if reader.opener is None:
        fn = (ENGINE_SCENES if reader.key == "engine-scenes" else ENGINE)[workload]
        return lambda run: fn(loc, q)
    opener, work = reader.opener, reader.work or WORKLOADS[workload]

    def run_once(run: int) -> np.ndarray:
        with opener(loc, run) as arr:
            return work(arr, q)

    return run_once
