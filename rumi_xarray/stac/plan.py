"""Plan a STAC load across grids: time groups, chunk bins, source windows, native calls.

Pure planning, no I/O: what each output chunk reads and how it is assembled.

1. **Time groups** (:func:`time_groups`): every stored time step of every
   Item is a *unit*; units are grouped by ``groupby`` (identical time, solar
   day, Item, or an Item property) and sorted within a group by time, then
   Item id, which is the order mosaicking takes them in (first valid pixel
   wins), as odc-stac does.
2. **Bins** (:func:`bins`): which Items' footprints touch each spatial chunk
   of the output grid (odc-geo's ``GeoboxTiles``), computed once at open.
3. **Block plan** (:func:`block_plan`), for one output chunk: per Item, the
   source window that covers the chunk and the part of the chunk it covers
   (odc-geo's ``compute_reproject_roi``, the same computation odc-stac
   makes, so pasting versus resampling is decided alike), padded for wide
   kernels (:func:`source_padding`) or, for ``sum``, widened until GDAL
   picks in it the pixels it picks in the whole image
   (:func:`whole_image_window`); windows widened to whole tile cells
   (the frames they touch, so no extra decoding); then
   one native ``read_many`` call per *source group* (Items sharing frame
   layout, dtype, time steps and bands), windows made equal by widening
   them inside their images unless that would decode over 1.5x the frames,
   in which case each window size gets its own call.
"""

from __future__ import annotations

import abc
import hashlib
import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_xarray.model.cube import Cube, Scene
from rumi_xarray.model.grid import Grid
from rumi_xarray.model.planning import Call
from rumi_xarray.stac.parse import StacSource

if TYPE_CHECKING:
    from odc.geo.types import NormalizedROI

#: Widening windows to one size is accepted up to this many times the frames.
WIDEN_LIMIT = 1.5
#: Radius (output pixels) of GDAL's resampling kernels (its GWKGetFilterRadius); the
#: others (bilinear, and average, mode and the other statistics) reach 1.
KERNEL_RADIUS = {"nearest": 0, "cubic": 2, "cubic_spline": 2, "lanczos": 3, "gauss": 2}
#: GDAL's warper gives its kernel the whole width (height) of the source it is handed
#: when the pixels an output chunk needs span more than this share of it (its
#: ComputeSourceWindow); below it, just those pixels.
GDAL_FULL_SPAN = 0.9


def source_padding(resampling: str, scale: float) -> int:
    """Return the source pixels a window needs around its footprint for a resampling kernel.

    GDAL's warper (as ``odc.stac.load`` calls it) widens a kernel by the shrink
    factor when the output is coarser, so that every source pixel under an
    output pixel counts: a radius of ``r`` output pixels covers ``r * scale``
    source pixels. One more pixel covers the sub-pixel rounding of the
    footprint. odc-geo's default padding (1 pixel) is kept when it is wider.

    Parameters
    ----------
    resampling : str
        rasterio resampling name.
    scale : float
        Source pixels per output pixel along the wider axis (above 1: coarser output).

    Returns
    -------
    int

    Examples
    --------
    >>> source_padding("bilinear", 0.8)
    1
    >>> source_padding("lanczos", 4.5)
    15
    """
    radius = KERNEL_RADIUS.get(resampling, 1)
    if radius == 0:
        return 1
    if scale <= 1:
        return radius
    return math.ceil(radius * scale) + 1


def whole_image_window(roi: NormalizedROI, shape: tuple[int, int]) -> tuple[slice, slice]:
    """Return a source window in which GDAL's warper picks the pixels it picks in the image.

    ``odc.stac.load`` hands GDAL the whole image and GDAL reads the pixels an
    output chunk needs: on each axis, all of them when they span more than
    :data:`GDAL_FULL_SPAN` of the image, else just those. Given a window
    instead, GDAL applies that rule to the window: a tight one is taken
    whole, a pixel or two wider than the image's choice. Most kernels do not
    care; GDAL's ``sum`` (GDAL 3.10) does, as it maps every source pixel it
    is given onto the output. A pixel straddling the line two source pixels
    left or right of the chunk is taken for one crossing the antimeridian, and when its
    inner corner lies within 1/1024 pixel of that line it becomes a sliver
    stretched across the chunk, adding to one or two of its rows; and output
    pixels no valid source pixel covers can get sums of ~1e-11, which a
    16-bit output writes as 1 rather than nodata. A window this much wider
    than ``roi`` (or the whole axis) makes GDAL pick the image's pixels
    again, so both libraries sum the same ones.

    Parameters
    ----------
    roi : (slice, slice)
        Rows and columns the output chunk needs (odc-geo's ``roi_src``), within the
        image.
    shape : (int, int)
        Height and width of the image.

    Returns
    -------
    (slice, slice)
        Rows and columns to read and hand to GDAL: ``roi`` widened so that it
        spans at most :data:`GDAL_FULL_SPAN` of the window, or the whole axis.

    Examples
    --------
    >>> whole_image_window((slice(40, 80), slice(0, 50)), (150, 180))
    (slice(37, 83, None), slice(0, 57, None))
    >>> whole_image_window((slice(10, 145), slice(60, 120)), (150, 180))
    (slice(0, 150, None), slice(56, 124, None))
    """
    rows, cols = (_whole_image_span(int(r.start), int(r.stop), int(n))
                  for r, n in zip(roi, shape, strict=True))
    return rows, cols


def _whole_image_span(start: int, stop: int, size: int) -> slice:
    needed = stop - start
    width = math.ceil(needed / GDAL_FULL_SPAN) + 1
    if width >= size:
        return slice(0, size)
    end = min(size, max(0, start - (width - needed) // 2) + width)
    return slice(end - width, end)


@dataclass(frozen=True)
class Unit:
    """One stored time step of one source: what mosaicking layers."""

    source: int
    step: int
    seconds: int


@dataclass(frozen=True)
class Load(abc.ABC):
    """A reprojecting load as its dask graph stores it: the output, and how a block is planned.

    :mod:`rumi_xarray.stac.graph` builds one graph for every kind of load from
    these attributes and :meth:`block_plan`: a :class:`LoadPlan` plans its
    blocks from the Items parsed at open; a
    :class:`~rumi_xarray.stac.archive.TableLoad` looks each block's Items up in
    its table first.

    Attributes
    ----------
    geobox : odc.geo.geobox.GeoBox
        The output grid.
    chunks : tuple of tuple of int
        Output chunks along time, band, y and x.
    dtype : numpy.dtype
        Output sample type.
    fill : int or float
        Output value where no Item has a valid pixel.
    resampling : str
        rasterio resampling name (``"nearest"``, ``"bilinear"``...).
    token : str
        Deterministic name of this load (dask keys).
    """

    geobox: Any = field(repr=False)
    chunks: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    dtype: np.dtype
    fill: Any
    resampling: str
    token: str

    @property
    def numblocks(self) -> tuple[int, int, int, int]:
        """Return the number of chunks along time, band, y and x."""
        t, b, y, x = self.chunks
        return (len(t), len(b), len(y), len(x))

    @abc.abstractmethod
    def block_plan(self, it: int, ib: int, iy: int, ix: int) -> BlockPlan:
        """Plan the reads and the mosaicking of one output chunk.

        Parameters
        ----------
        it, ib, iy, ix : int
            Chunk indices along time, band, y and x.

        Returns
        -------
        BlockPlan
        """


@dataclass(frozen=True)
class LoadPlan(Load):
    """A load planned at open from its parsed Items, stored once in a dask graph.

    Attributes
    ----------
    sources : tuple of StacSource
    scenes : tuple of Scene
        The readable source of each Item (resolved path or URL, header).
    band_index : tuple of tuple of int
        Per source, the stored band of each output band.
    groups : tuple of tuple of Unit
        Units of each output time step, in mosaicking order.
    bins : mapping
        ``(iy, ix)`` -> sources whose footprint touches that spatial chunk.

    The output's attributes are those of :class:`Load`.
    """

    sources: tuple[StacSource, ...]
    scenes: tuple[Scene, ...]
    band_index: tuple[tuple[int, ...], ...]
    groups: tuple[tuple[Unit, ...], ...]
    bins: Mapping[tuple[int, int], tuple[int, ...]] = field(repr=False)

    def block_plan(self, it: int, ib: int, iy: int, ix: int) -> BlockPlan:
        """Plan one output chunk from the Items parsed at open (:func:`block_plan`)."""
        return block_plan(self, it, ib, iy, ix)


@dataclass(frozen=True)
class PlannedRead:
    """One native call of a block: equal windows of Items sharing a frame layout.

    ``cube`` holds the call's scenes (indexed by ``call.scenes``) and the
    frame grid they share; only its layout (tile size, frame order, dtype) is
    used, not its image size, which differs between Items.
    """

    cube: Cube
    call: Call

    def planned_calls(self, key: Any = None) -> list[Call]:
        """Return ``[call]`` (the interface ``explain()`` reads).

        Parameters
        ----------
        key : ignored

        Returns
        -------
        list of Call
        """
        return [self.call]


@dataclass(frozen=True)
class Contribution:
    """Where one unit's pixels come from in a block, and where they go.

    ``results[read][item, step, :, rows, cols]`` are the source pixels (all
    output bands); they cover ``roi_dst`` of the block, pasted as they are
    (``paste``) or reprojected from ``src_gbox`` with odc-geo.
    """

    read: int
    item: int
    step: int
    rows: slice
    cols: slice
    roi_dst: tuple[slice, slice]
    paste: bool
    src_gbox: Any
    nodata: float | None


@dataclass(frozen=True)
class BlockPlan:
    """The reads and the mosaicking of one output chunk ``(time, band, y, x)``."""

    reads: tuple[PlannedRead, ...]
    layers: tuple[tuple[Contribution, ...], ...]
    shape: tuple[int, int, int, int]
    geobox: Any
    dtype: np.dtype
    fill: Any
    resampling: str


# --- at open -----------------------------------------------------------------------


def groupby_name(groupby: Any) -> str:
    """Return what ``groupby`` names, None being ``"id"`` (every unit alone), as in odc-stac.

    Raises
    ------
    TypeError
        ``groupby`` is neither a string nor None.
    """
    if groupby is None:
        return "id"
    if not isinstance(groupby, str):
        raise TypeError(f"groupby must be a string or None, got {type(groupby).__name__}")
    return groupby


def step_bounds(seconds: np.ndarray, groupby: str, gbox: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return, per time, the inclusive bounds of the output time step it falls in.

    The one definition of the time-based ``groupby`` values, shared by a load
    planned at open (:func:`time_groups`) and one whose tasks look their Items
    up (:func:`rumi_xarray.stac.archive.time_groups`).

    Parameters
    ----------
    seconds : numpy.ndarray
        POSIX seconds (integers).
    groupby : {"time", "solar_day"}
        ``"time"``: the time itself; ``"solar_day"``: the local solar day at
        the longitude of the output grid's centre (UTC shifted by whole
        hours, longitude / 15, as odc-stac shifts it).
    gbox : odc.geo.geobox.GeoBox
        The output grid (its centre longitude, for ``"solar_day"``).

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper bounds (POSIX seconds); times in one step share them.
    """
    seconds = np.asarray(seconds, dtype=np.int64)
    if groupby == "time":
        return seconds, seconds
    if groupby != "solar_day":
        raise ValueError(f"groupby {groupby!r} is not a time-based grouping")
    lon = gbox.extent.centroid.to_crs("epsg:4326").points[0][0]
    offset = int(lon / 15) * 3600
    lo = (seconds + offset) // 86400 * 86400 - offset
    return lo, lo + 86399


def time_groups(sources: Sequence[StacSource], groupby: Any, gbox: Any
                ) -> tuple[tuple[Unit, ...], ...]:
    """Group the units of every source into output time steps.

    Parameters
    ----------
    sources : sequence of StacSource
    groupby : {"time", "solar_day", "id"}, None or str
        ``"time"`` or ``"solar_day"``: the same step (:func:`step_bounds`);
        ``"id"`` or None: every unit alone, in input order; any other
        string: the value of that Item property.
    gbox : odc.geo.geobox.GeoBox
        The output grid (its centre longitude, for ``"solar_day"``).

    Returns
    -------
    tuple of tuple of Unit
        Output time steps in order; units within one in mosaicking order.
    """
    groupby = groupby_name(groupby)
    units = [(s, Unit(i, step, int(sec))) for i, s in enumerate(sources)
             for step, sec in enumerate(s.seconds)]
    steps: dict[int, int] = {}
    if groupby in ("time", "solar_day"):
        seconds = np.array([u.seconds for _, u in units], dtype=np.int64)
        steps = {u.seconds: int(lo) for (_, u), lo
                 in zip(units, step_bounds(seconds, groupby, gbox)[0], strict=True)}

    def key(entry: tuple[StacSource, Unit]) -> Hashable:
        s, u = entry
        if groupby in ("time", "solar_day"):
            return steps[u.seconds]
        if groupby == "id":
            return (s.position, u.step)
        value = s.properties.get(groupby)
        return (value is None, _sortable(value))

    units.sort(key=lambda e: (key(e), e[1].seconds, e[0].item_id, e[1].step))
    groups: list[list[Unit]] = []
    last: Any = object()
    for entry in units:
        k = key(entry)
        if not groups or k != last:
            groups.append([])
            last = k
        groups[-1].append(entry[1])
    return tuple(tuple(g) for g in groups)


def _sortable(value: Any) -> Any:
    if isinstance(value, (int, float, str)):
        return value
    return repr(value)


def bins(sources: Sequence[StacSource], gbox: Any, chunks: tuple[tuple[int, ...], ...]
         ) -> dict[tuple[int, int], tuple[int, ...]]:
    """Return, per spatial chunk, the sources whose footprint touches it.

    Parameters
    ----------
    sources : sequence of StacSource
    gbox : odc.geo.geobox.GeoBox
    chunks : (time, band, y, x) chunks

    Returns
    -------
    dict
        ``(iy, ix)`` -> source indices.
    """
    from odc.geo.geobox import GeoboxTiles

    tiles = GeoboxTiles(gbox, (chunks[2][0], chunks[3][0]))
    found: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, s in enumerate(sources):
        footprint = s.geobox.footprint(gbox.crs, wrapdateline=True)
        if footprint.is_empty:
            continue
        for index in tiles.tiles(footprint):
            found[(int(index[0]), int(index[1]))].append(i)
    return {k: tuple(v) for k, v in found.items()}


def load_token(sources: Sequence[StacSource], *parts: Any) -> str:
    """Return a deterministic name for a load (same Items and arguments, same name).

    Parameters
    ----------
    sources : sequence of StacSource
    *parts
        Everything else that changes the result (grid, bands, groups...).

    Returns
    -------
    str
    """
    digest = hashlib.sha256()
    for s in sources:
        digest.update(s.href.encode("utf-8", "replace"))
        digest.update(s.header)
        digest.update(repr((s.seconds, s.facts, s.band_texts)).encode())
    digest.update(repr(parts).encode())
    return digest.hexdigest()[:32]


# --- per block (at compute, and for explain) ----------------------------------------


def block_plan(plan: LoadPlan, it: int, ib: int, iy: int, ix: int) -> BlockPlan:
    """Plan the reads and the mosaicking of one output chunk.

    Parameters
    ----------
    plan : LoadPlan
    it, ib, iy, ix : int
        Chunk indices along time, band, y and x.

    Returns
    -------
    BlockPlan
    """
    from odc.geo.overlap import compute_reproject_roi
    from odc.geo.roi import roi_is_empty

    t0, nt = sum(plan.chunks[0][:it]), plan.chunks[0][it]
    b0, nb = sum(plan.chunks[1][:ib]), plan.chunks[1][ib]
    y0, x0 = sum(plan.chunks[2][:iy]), sum(plan.chunks[3][:ix])
    h, w = plan.chunks[2][iy], plan.chunks[3][ix]
    dst = plan.geobox[y0:y0 + h, x0:x0 + w]
    present = set(plan.bins.get((iy, ix), ()))
    layers = [[u for u in plan.groups[t0 + k] if u.source in present] for k in range(nt)]
    steps: dict[int, set[int]] = defaultdict(set)
    for layer in layers:
        for u in layer:
            steps[u.source].add(u.step)
    # odc-stac ignores sub-pixel shifts up to 0.9 px for nearest (paste), 0.05 px else.
    ttol = 0.9 if plan.resampling == "nearest" else 0.05
    windows: dict[int, _Window] = {}
    for s in sorted(steps):
        source = plan.sources[s]
        info = compute_reproject_roi(source.geobox, dst, ttol=ttol)
        roi_src = info.roi_src
        if plan.resampling == "sum" and not info.paste_ok:
            # GDAL's sum depends on the source pixels it is handed, not only on those
            # under the output: it is given those it takes from the whole image, as in
            # odc.stac.load, and warps into odc-geo's roi_dst, as odc-stac does.
            if not roi_is_empty(roi_src):
                roi_src = whole_image_window(roi_src, source.geobox.shape.yx)
        elif not info.paste_ok:
            padding = source_padding(plan.resampling, max(info.scale2.xy))
            if padding > 1:
                # odc-geo pads source windows by 1 pixel: enough for bilinear on a finer
                # grid, not for wider kernels nor for kernels GDAL widens on a coarser
                # grid (mosaic.py lets it), which would see the window's edge instead of
                # the image.
                info = compute_reproject_roi(source.geobox, dst, ttol=ttol,
                                             padding=padding)
                roi_src = info.roi_src
        if roi_is_empty(roi_src) or roi_is_empty(info.roi_dst):
            continue
        rows, cols = roi_src
        windows[s] = _Window(s, source.grid, (int(rows.start), int(rows.stop)),
                             (int(cols.start), int(cols.stop)), tuple(sorted(steps[s])),
                             plan.band_index[s][b0:b0 + nb], info.roi_dst,
                             bool(info.paste_ok and info.read_shrink == 1),
                             source.geobox[roi_src], source.nodata)
    reads, where = _calls(plan, list(windows.values()))
    out_layers = []
    for layer in layers:
        contributions = []
        for u in layer:
            win = windows.get(u.source)
            if win is None:
                continue
            read, item, dr, dc = where[u.source]
            call = reads[read].call
            contributions.append(Contribution(
                read=read, item=item, step=call.times.index(u.step),
                rows=slice(dr, dr + win.rows[1] - win.rows[0]),
                cols=slice(dc, dc + win.cols[1] - win.cols[0]),
                roi_dst=(win.roi_dst[0], win.roi_dst[1]), paste=win.paste,
                src_gbox=win.src_gbox, nodata=win.nodata))
        out_layers.append(tuple(contributions))
    return BlockPlan(reads=tuple(reads), layers=tuple(out_layers),
                     shape=(nt, nb, h, w), geobox=dst, dtype=plan.dtype,
                     fill=plan.fill, resampling=plan.resampling)


@dataclass(frozen=True)
class _Window:
    source: int
    grid: Grid
    rows: tuple[int, int]
    cols: tuple[int, int]
    steps: tuple[int, ...]
    bands: tuple[int, ...]
    roi_dst: Any
    paste: bool
    src_gbox: Any
    nodata: float | None

    def aligned(self) -> tuple[int, int, int, int]:
        """Return the window widened to whole tile cells (the frames it touches)."""
        g = self.grid
        r0 = self.rows[0] // g.tile_height * g.tile_height
        c0 = self.cols[0] // g.tile_width * g.tile_width
        r1 = min(g.height, -(-self.rows[1] // g.tile_height) * g.tile_height)
        c1 = min(g.width, -(-self.cols[1] // g.tile_width) * g.tile_width)
        return r0, c0, r1 - r0, c1 - c0


def _calls(plan: LoadPlan, windows: list[_Window]
           ) -> tuple[list[PlannedRead], dict[int, tuple[int, int, int, int]]]:
    """Return the native calls reading ``windows``, and where each source lands.

    ``where[source] = (read index, item index, row offset, column offset)``:
    the offsets of the source window inside the (widened) window read.
    """
    groups: dict[tuple[Any, ...], list[_Window]] = defaultdict(list)
    for win in windows:
        groups[(win.grid.layout_key, win.steps, win.bands)].append(win)
    reads: list[PlannedRead] = []
    where: dict[int, tuple[int, int, int, int]] = {}
    for (_, steps, bands), members in groups.items():
        for batch, height, width in _batches(members):
            scenes, rows, cols = [], [], []
            for item, (win, r, c) in enumerate(batch):
                scenes.append(plan.scenes[win.source])
                rows.append(r)
                cols.append(c)
                where[win.source] = (len(reads), item, win.rows[0] - r, win.cols[0] - c)
            cube = Cube(tuple(scenes), batch[0][0].grid, ())
            call = Call(scenes=tuple(range(len(batch))), rows=tuple(rows), cols=tuple(cols),
                        times=steps, bands=bands, height=height, width=width)
            reads.append(PlannedRead(cube, call))
    return reads, where


def _batches(members: list[_Window]
             ) -> list[tuple[list[tuple[_Window, int, int]], int, int]]:
    """Split windows of one source group into calls of equal window size.

    One call when widening every window to the largest size (inside its own
    image) decodes at most :data:`WIDEN_LIMIT` times the frames; otherwise
    one call per distinct size.
    """
    aligned = [(win, *win.aligned()) for win in members]
    height = max(a[3] for a in aligned)
    width = max(a[4] for a in aligned)
    fits = [a for a in aligned if a[0].grid.height >= height and a[0].grid.width >= width]
    if len(fits) == len(aligned):
        own = sum(_frames(win, r, c, h, w) for win, r, c, h, w in aligned)
        widened = []
        for win, r, c, _, _ in aligned:
            r2 = min(r, win.grid.height - height)
            c2 = min(c, win.grid.width - width)
            widened.append((win, r2, c2))
        cost = sum(_frames(win, r, c, height, width) for win, r, c in widened)
        if cost <= WIDEN_LIMIT * own:
            return [(widened, height, width)]
    by_size: dict[tuple[int, int], list[tuple[_Window, int, int]]] = defaultdict(list)
    for win, r, c, h, w in aligned:
        by_size[(h, w)].append((win, r, c))
    return [(batch, h, w) for (h, w), batch in by_size.items()]


def _frames(win: _Window, row: int, col: int, height: int, width: int) -> int:
    return win.grid.frames_touched(len(win.steps), len(win.bands), row, col, height, width)
