"""The reads behind ``.rumi.explore()``: one date's map and one pixel's series, with their cost.

No widget here (``backend/explorer.py`` draws them): what the explorer reads,
from the Rumi array under a Dataset or DataArray whatever path it was opened
on (lazily indexed, dask-backed, a catalog cube, a remote URL), read through
that array's lazy path so each interaction is one routed read:

- a map (:func:`read_map`) reads one date's window of the level
  :func:`rumi_xarray.model.views.choose_level` picks, every ``step``-th pixel
  (:class:`~rumi_xarray.model.views.MapGrid`): on an overview when the file
  has them (for a catalog cube, the overview of the file holding that date),
  else only the frames of that date and window at full resolution;
- a series (:func:`read_series`) reads one pixel at every date: the cell
  path, one planned read (one ``read_many`` across the scenes of a catalog).

Each read is reported as a :class:`Reading`: librumi's plan of it (calls,
frames, byte ranges, without I/O) and what running it took (native calls
counted by ``rx.stats()``, seconds). Values are decoded exactly as the
variable explored is (the same ``mask_and_scale``), so they equal what
indexing it gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from xarray.core import indexing

from rumi_xarray.backend.array import RumiBackendArray
from rumi_xarray.backend.chips import backend_of, selected_positions
from rumi_xarray.backend.wrappers import find_backend
from rumi_xarray.conventions import decoding
from rumi_xarray.conventions.cf import PACKING
from rumi_xarray.errors import RumiMissingDependencyError, RumiUnsupportedError, argument_error
from rumi_xarray.model.costs import Explanation
from rumi_xarray.model.views import MapGrid


def require_explore_extra() -> None:
    """Raise a typed error naming the ``explore`` extra when its packages are missing.

    Raises
    ------
    RumiMissingDependencyError
        ipywidgets, ipyevents or matplotlib cannot be imported.
    """
    # Imported here, one by one, so that a missing one is named (an import of each, as
    # explore() then makes; a failing import of ipywidgets' own dependencies counts too).
    missing = []
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        missing.append("ipywidgets")
    try:
        import ipyevents  # noqa: F401
    except ImportError:
        missing.append("ipyevents")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        missing.append("matplotlib")
    if missing:
        err = RumiMissingDependencyError(
            f".rumi.explore() needs {', '.join(missing)}, which is not installed: "
            f"pip install 'rumi-xarray[explore]'")
        err.extra = "explore"
        err.missing = tuple(missing)
        raise err


@dataclass(frozen=True)
class Reading:
    """One read the explorer made, and what it cost.

    Attributes
    ----------
    kind : str
        ``"map"`` or ``"series"``.
    planned : Explanation
        librumi's plan of the read (calls, windows, frames, compressed bytes
        in byte ranges), made without I/O just before it ran.
    calls : int
        Native read calls the read made (counted as ``rx.stats()`` counts them;
        0 when the tile cache served it).
    seconds : float
        Wall time of the read, decoding included.
    note : str
        What the user should know about where the values came from (a date
        whose file lacks the overview chosen, shown from full resolution).
    """

    kind: str
    planned: Explanation
    calls: int
    seconds: float
    note: str = ""

    def __str__(self) -> str:
        from rumi_xarray.formatting import human_size

        p = self.planned
        took = f"{self.seconds * 1e3:.0f} ms"
        note = f" ({self.note})" if self.note else ""
        if not p.calls:
            return f"served from the tile cache, no read, in {took}{note}"
        return (f"{self.calls} native read call(s) in {took}: {p.items} window(s), "
                f"{p.frames} frame(s), {human_size(p.compressed_bytes)} compressed in "
                f"{p.ranges} byte range(s){note}")


@dataclass
class ExploreSource:
    """What the explorer reads: the Rumi array under the variable and its selection.

    Attributes
    ----------
    array : RumiBackendArray
        The whole cube ``(time, band, y, x)``.
    times : numpy.ndarray
        Cube time steps of the variable, in its order.
    time_values : numpy.ndarray
        Their labels (the ``time`` coordinate).
    bands : tuple of int
        Cube bands of the variable, in its order.
    band_names, common_names : tuple of str
        Their labels (``band``) and common names (``""`` where unknown).
    row0, col0, height, width : int
        The variable's window of the cube (the whole image unless it was
        selected in ``y``/``x``).
    x, y : numpy.ndarray or None
        Pixel-centre coordinates of that window, when 1-D.
    packing : dict
        The variable's CF attributes (``_FillValue``, ``scale_factor``...).
    mask_and_scale : bool or None
        How the variable was decoded (the same is applied here).
    name : str
        Credential-free name of the source(s), for messages.
    label : str
        What the values are, for axes: ``long_name`` and ``units``.
    factors : list of int
        Overview factors, finest first (``[]``: none): the file's, or for a
        cube of several files (a catalog) its first file's.
    open_level : callable or None
        ``open_level(k, scene)`` opens overview level ``k`` of the cube's
        file ``scene`` as a Dataset.
    """

    array: RumiBackendArray
    times: np.ndarray
    time_values: np.ndarray
    bands: tuple[int, ...]
    band_names: tuple[str, ...]
    common_names: tuple[str, ...]
    row0: int
    col0: int
    height: int
    width: int
    x: np.ndarray | None
    y: np.ndarray | None
    packing: dict[str, Any]
    mask_and_scale: bool | None
    name: str
    label: str = "value"
    factors: list[int] = field(default_factory=list)
    open_level: Callable[[int, int], xr.Dataset] | None = None
    #: Level arrays opened, by ``(level, scene)``; None where that file lacks the level.
    _levels: dict[tuple[int, int], RumiBackendArray | None] = field(default_factory=dict)

    @property
    def full_shape(self) -> tuple[int, int]:
        """Return ``(height, width)`` of the full-resolution cube image."""
        _, _, height, width = self.array.cube.shape
        return height, width

    def band_positions(self, band: Any) -> tuple[int, ...]:
        """Return positions (in :attr:`bands`) of a band label, common name, or 3 of them.

        Parameters
        ----------
        band : str or sequence of str
            A ``band`` label (``"B04"``) or common name (``"red"``), or three of
            them for an RGB composite.

        Returns
        -------
        tuple of int

        Raises
        ------
        RumiArgumentError
            A name matches no band, or a composite is not three bands.
        """
        names = [band] if isinstance(band, str | int | np.integer) else list(band)
        if len(names) not in (1, 3):
            raise argument_error(f"{self.name}: band= takes one band or three (red, green, "
                                 f"blue), got {len(names)}: {names!r}", "band", self.name)
        out = []
        for label in names:
            text = str(label)
            if text in self.band_names:
                out.append(self.band_names.index(text))
            elif self.common_names.count(text.lower()) == 1:
                out.append(self.common_names.index(text.lower()))
            else:
                known = ", ".join(f"{n} ({c})" if c else n
                                  for n, c in zip(self.band_names, self.common_names,
                                                  strict=True))
                raise argument_error(f"{self.name}: no band {text!r}; bands are {known}",
                                     "band", self.name)
        return tuple(out)

    def default_bands(self) -> tuple[int, ...]:
        """Return red, green, blue when the bands have those common names, else the first."""
        rgb = ("red", "green", "blue")
        if all(self.common_names.count(c) == 1 for c in rgb):
            return tuple(self.common_names.index(c) for c in rgb)
        return (0,)

    def level_read(self, level: int | None, t: int
                   ) -> tuple[RumiBackendArray, int] | None:
        """Return the array holding date ``t`` at overview ``level``, and the date's index in it.

        At full resolution (``level=None``) that is the cube itself. On an
        overview, it is the level of the file holding the date (the file
        itself for a single file; for a catalog cube, the scene the date
        comes from), opened once, when a map first needs it.

        Parameters
        ----------
        level : int or None
        t : int
            Position along the explored ``time``.

        Returns
        -------
        (RumiBackendArray, int) or None
            None when the date's file has no such level (the map is then read
            at full resolution: :meth:`readable_grid`).

        Raises
        ------
        RumiUnsupportedError
            The level does not hold the file's dates and bands.
        """
        step = int(self.times[t])
        if level is None:
            return self.array, step
        scene, index = self.array.cube.steps[step]
        array = self._level(level, scene)
        return None if array is None else (array, index)

    def _level(self, level: int, scene: int) -> RumiBackendArray | None:
        """Return overview ``level`` of file ``scene``, opened once (None: it has none)."""
        key = (level, scene)
        if key not in self._levels:
            self._levels[key] = self._open_level(level, scene)
        return self._levels[key]

    def _open_level(self, level: int, scene: int) -> RumiBackendArray | None:
        cube = self.array.cube
        file = cube.scenes[scene]
        if self.open_level is None:
            return None
        own = level
        if scene:
            # Another file of a catalog: it may have been written with other levels (its
            # sidecar says which; the first file's were read already). Its level of the
            # same factor is read, wherever it is in its list; none: full resolution.
            from rumi_xarray.conventions import cf

            factors = [int(f) for f in
                       cf.read_source_sidecar(file.source, sidecar=True).overviews.factors]
            if self.factors[level] not in factors:
                return None
            own = factors.index(self.factors[level])
        ds = self.open_level(own, scene)
        located = find_backend(ds["band_data"].variable._data)
        steps = cube.scene_grid(scene).time_count
        if located is None or located[0].shape[:2] != (steps, cube.shape[1]):
            raise RumiUnsupportedError(f"{file.name}: overview {level} does not hold the "
                                       f"dates and bands of the file")
        return located[0]

    def level_shape(self, level: int) -> tuple[int, int]:
        """Return ``(height, width)`` of overview ``level`` (opening it in the first file).

        Every file of a cube shares one grid, so their levels share one shape.

        Parameters
        ----------
        level : int

        Returns
        -------
        tuple of int
        """
        found = self._level(level, 0)
        assert found is not None  # the first file's levels are self.factors
        return int(found.shape[-2]), int(found.shape[-1])

    def date_file(self, t: int) -> str:
        """Return the credential-free name of the file holding date ``t``."""
        cube = self.array.cube
        return cube.scenes[cube.steps[int(self.times[t])][0]].name

    def readable_grid(self, grid: MapGrid, t: int) -> MapGrid:
        """Return ``grid``, or the same samples at full resolution where date ``t`` lacks its level.

        Parameters
        ----------
        grid : MapGrid
        t : int
            Position along the explored ``time``.

        Returns
        -------
        MapGrid
        """
        if grid.level is None or self.level_read(grid.level, t) is not None:
            return grid
        return grid.at_full_resolution()

    def decode(self, raw: np.ndarray) -> np.ndarray:
        """Return stored samples decoded as the explored variable is."""
        return decoding.decode_samples(raw, self.packing, self.mask_and_scale)


def explore_source(obj: xr.Dataset | xr.DataArray) -> ExploreSource:
    """Return what the explorer reads from ``obj``.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray
        ``band_data(time, band, y, x)`` opened by rumi_xarray (or a Dataset
        holding it), lazily or with dask; selections along ``time`` and
        ``band`` are kept, and a ``y``/``x`` selection that is one window.

    Returns
    -------
    ExploreSource

    Raises
    ------
    RumiUnsupportedError
        ``obj`` is not backed by Rumi files, holds one variable per band, or
        was selected in ``y``/``x`` other than as one window.
    """
    if isinstance(obj, xr.Dataset):
        if "band_data" not in obj.data_vars:
            raise RumiUnsupportedError(
                "explore() needs the band_data(time, band, y, x) variable: open without "
                "band_as_variable=True")
        da = obj["band_data"]
    else:
        da = obj
    array, key = backend_of(da, "explorer maps and series")
    if array.band is not None:
        raise RumiUnsupportedError(f"{da.name!r} holds one band: explore the Dataset opened "
                                   f"without band_as_variable=True")
    name = array.cube.name
    pos = selected_positions(key, array.dims, array.shape)
    window = []
    for axis in ("y", "x"):
        p = pos[axis]
        if p.size == 0 or not np.array_equal(p, np.arange(p[0], p[0] + p.size)):
            raise RumiUnsupportedError(
                f"{name}: explore() shows one window of the image; this {axis!r} selection "
                f"is not one (select a slice with step 1, or nothing)")
        window += [int(p[0]), int(p.size)]
    coords = da.coords
    band_names = (tuple(str(b) for b in coords["band"].values) if "band" in coords
                  else tuple(str(b) for b in pos["band"]))
    common = (tuple(str(c).lower() for c in coords["common_name"].values)
              if "common_name" in coords and coords["common_name"].dims == ("band",)
              else ("",) * len(band_names))
    packing: dict[str, Any] = {}
    for where in (da.attrs, da.encoding):
        for k in PACKING:
            if k in where and k not in packing:
                packing[k] = where[k]
    source = ExploreSource(
        array=array, times=np.asarray(pos["time"], dtype=np.int64),
        time_values=(np.asarray(coords["time"].values) if "time" in coords
                     else np.asarray(pos["time"])),
        bands=tuple(int(b) for b in pos["band"]), band_names=band_names, common_names=common,
        row0=window[0], col0=window[2], height=window[1], width=window[3],
        x=_coordinate(coords, "x"), y=_coordinate(coords, "y"),
        packing=packing, mask_and_scale=_policy(da, array, packing), name=name,
        label=_axis_label(da))
    source.factors, source.open_level = _overviews(array)
    return source


def _coordinate(coords: Any, axis: str) -> np.ndarray | None:
    if axis in coords and coords[axis].ndim == 1:
        return np.asarray(coords[axis].values)
    return None


def _axis_label(da: xr.DataArray) -> str:
    what = str(da.attrs.get("long_name") or (da.name if da.name is not None else "value"))
    units = da.attrs.get("units")
    # CF's "1" says dimensionless: nothing to add.
    return f"{what} ({units})" if units and str(units) != "1" else what


def _policy(da: xr.DataArray, array: RumiBackendArray, packing: dict[str, Any]) -> bool | None:
    """Return the ``mask_and_scale`` that decodes the stored samples into ``da``'s values."""
    if any(k in da.attrs for k in PACKING):
        return False  # opened with mask_and_scale=False: the CF attributes were left as such
    if da.dtype == decoding.decoded_dtype(array.dtype, packing, None):
        return None
    return True


# --- overviews --------------------------------------------------------------------------


def _overviews(array: RumiBackendArray
               ) -> tuple[list[int], Callable[[int, int], xr.Dataset] | None]:
    """Return the overview factors of a cube's files and how to open a file's level, or none.

    The factors are the first file's (a single file's own); every other file
    of a catalog is checked when a map first reads one of its dates. Files
    given as bytes or file objects, and cubes already opened at a level
    (``overview_level=``, a catalog's ``resolution=``), are shown from the
    resolution they were opened at, every ``step``-th pixel.
    """
    # The levels the file's sidecar records, as rx.overview_factors reads them (that
    # function lives above the accessor this module serves; the sidecar is below both).
    from rumi_xarray.conventions import cf

    scenes = array.cube.scenes
    if any(not isinstance(s.source, str) or s.overview is not None for s in scenes):
        return [], None
    factors = [int(f) for f in
               cf.read_source_sidecar(scenes[0].source, sidecar=True).overviews.factors]
    if not factors:
        return [], None

    def open_level(level: int, scene: int) -> xr.Dataset:
        return open_overview(scenes[scene].source, level)

    return factors, open_level


def open_overview(source: str, level: int) -> xr.Dataset:
    """Open overview ``level`` of a file (rioxarray's ``overview_level``), stored samples.

    The explorer decodes them as the variable explored is.

    Parameters
    ----------
    source : str
        Path or URL.
    level : int

    Returns
    -------
    xarray.Dataset
    """
    return xr.open_dataset(source, engine="rumi", overview_level=level, mask_and_scale=False)


# --- reads ------------------------------------------------------------------------------


def _timed_read(kind: str, array: RumiBackendArray, key: indexing.ExplicitIndexer,
                note: str = "") -> tuple[np.ndarray, Reading]:
    """Read ``array[key]`` through its lazy path; return it and its :class:`Reading`."""
    from rumi_xarray.native.reads import explain_calls
    from rumi_xarray.native.stats import snapshot

    # Planned with the tile cache as it is now and the progress setting, exactly as
    # the read then routes it (``explain()`` counts the same way).
    planned = explain_calls([(array.cube, call) for call in array.planned_calls(key)])
    before = snapshot()["calls"]
    start = time.perf_counter()
    raw = array[key]
    seconds = time.perf_counter() - start
    calls = snapshot()["calls"] - before
    return raw, Reading(kind=kind, planned=planned, calls=calls, seconds=seconds, note=note)


def read_map(source: ExploreSource, grid: MapGrid, t: int, bands: Sequence[int]
             ) -> tuple[np.ndarray, Reading]:
    """Read one date's map: ``(band, y, x)`` decoded samples of ``grid``.

    Parameters
    ----------
    source : ExploreSource
    grid : MapGrid
        From :func:`rumi_xarray.model.views.plan_map`, in the cube's full
        resolution pixels.
    t : int
        Position along the explored ``time``.
    bands : sequence of int
        Positions along the explored ``band``.

    Returns
    -------
    numpy.ndarray, Reading
        A date whose file lacks the grid's level (a catalog of files written
        with different overviews) is read at full resolution, each block's
        first pixel, and the reading's ``note`` says so.
    """
    readable = source.readable_grid(grid, t)
    note = ("" if readable is grid else f"{source.date_file(t)} has no overview "
            f"1:{grid.factor}: shown from full resolution")
    found = source.level_read(readable.level, t)
    assert found is not None  # readable_grid chose a level the date's file has
    array, index = found
    grid = readable
    key = indexing.OuterIndexer((index,
                                 np.asarray([source.bands[b] for b in bands], dtype=np.int64),
                                 grid.rows, grid.cols))
    raw, reading = _timed_read("map", array, key, note)
    return source.decode(raw), reading


def read_series(source: ExploreSource, row: int, col: int, bands: Sequence[int]
                ) -> tuple[np.ndarray, Reading]:
    """Read one pixel at every date: ``(time, band)`` decoded samples, one planned read.

    Parameters
    ----------
    source : ExploreSource
    row, col : int
        Full-resolution pixel of the cube.
    bands : sequence of int
        Positions along the explored ``band``.

    Returns
    -------
    numpy.ndarray, Reading
    """
    key = indexing.OuterIndexer((source.times,
                                 np.asarray([source.bands[b] for b in bands], dtype=np.int64),
                                 int(row), int(col)))
    raw, reading = _timed_read("series", source.array, key)
    return source.decode(raw), reading


def nearest_time(source: ExploreSource, value: Any) -> int:
    """Return the position of the date nearest ``value`` along the explored ``time``.

    Parameters
    ----------
    source : ExploreSource
    value : str, datetime, numpy.datetime64 or int
        A date; for times that are not dates (cftime, plain numbers), a value
        equal to one of them.

    Returns
    -------
    int

    Raises
    ------
    RumiArgumentError
        ``value`` is not a date, or not one of the times.
    """
    times = source.time_values
    if np.issubdtype(times.dtype, np.datetime64):
        if isinstance(value, int | float | np.integer | np.floating):
            # A number would be read as nanoseconds since 1970: say what time= takes.
            raise argument_error(f"{source.name}: time= takes a date such as '2024-06-01', "
                                 f"not the number {value!r} (for the i-th date pass "
                                 f"ds.time[i].values)", "time", source.name)
        try:
            import pandas as pd

            target = np.datetime64(pd.Timestamp(value).tz_localize(None), "ns")
        except (TypeError, ValueError) as exc:
            raise argument_error(f"{source.name}: time={value!r} is not a date ({exc})",
                                 "time", source.name) from exc
        gaps = np.abs((times.astype("datetime64[ns]") - target).astype(np.int64))
        return int(np.argmin(gaps))
    matches = [i for i, v in enumerate(times.tolist()) if v == value]
    if not matches:
        raise argument_error(f"{source.name}: time={value!r} is none of the times",
                             "time", source.name)
    return matches[0]
