"""The ``.rumi`` accessor on Datasets and DataArrays, and ``explain()``.

Importing this module only registers the accessor (it imports xarray and
nothing heavy): everything it needs loads when it is used.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import xarray as xr

from rumi_xarray.errors import RumiArgumentError
from rumi_xarray.model.costs import Explanation, overview_lines

__all__ = ["Explanation", "RumiDataArrayAccessor", "RumiDatasetAccessor", "backend_arrays",
           "explain"]


def explain(obj: xr.Dataset | xr.DataArray) -> Explanation:
    """Dry-run the reads computing ``obj`` would make (lazy or dask-backed).

    For a lazily indexed variable: the read its current selection makes (the
    tile cache as it is now; with ``rx.set_options(progress=True)`` a large
    window runs in slices, and never because of a terminal or notebook, so the
    count is the same wherever this runs). For a dask-backed one:
    every chunk read left after dask culls and optimizes the graph exactly
    as ``compute`` does.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray

    Returns
    -------
    Explanation

    Examples
    --------
    >>> ds = xr.open_dataset("scene.rumi", engine="rumi", chunks={})
    >>> print(rx.explain(ds.band_data.sel(band="B04")))
    1 native read call(s), 1 window(s), 16 frame(s): ...
    """
    from rumi_xarray import progress
    from rumi_xarray.native.reads import explain_calls

    # One setting for every read, passed explicitly: a lazily indexed read splits
    # a large window into slices exactly when progress=True (planning.split_call).
    sliced = progress.sliced_reads()
    reads = _reads(obj)
    calls = [(array.cube, call) for array, key in reads
             for call in (array.planned_calls(key, progress=sliced)
                          if getattr(array, "rumi_backend_array", False)
                          else array.planned_calls(key))]
    tables = tuple(dict.fromkeys(cost for array, _ in reads
                                 if (cost := getattr(array.cube.scenes, "cost", ""))))
    # Said even when every tile is cached (no call left): which level the data come from.
    cubes = {id(array.cube): array.cube for array, _ in reads}
    return replace(explain_calls(calls, tables), overviews=overview_lines(cubes.values()))


def _reads(obj: xr.Dataset | xr.DataArray) -> list[tuple[Any, Any]]:
    """Return ``(backend array, key)`` of every read computing ``obj`` makes.

    A lazily indexed variable makes one (its composed selection); a dask-backed
    one makes one per chunk read left in its optimized graph.
    """
    from rumi_xarray.backend.wrappers import find_backend

    variables = list(obj.data_vars.values()) if isinstance(obj, xr.Dataset) else [obj]
    found = []
    seen: set[tuple[int, str]] = set()
    for var in variables:
        data = var.variable._data
        if hasattr(data, "__dask_graph__"):
            from rumi_xarray.dask.graphs import getter_calls

            for source, key in getter_calls(data):
                if (id(source), repr(key)) in seen:  # one read shared by several variables
                    continue
                seen.add((id(source), repr(key)))
                if hasattr(source, "planned_reads"):  # STAC loads (rumi_xarray.stac.graph)
                    found.extend(source.planned_reads(key))
                    continue
                located = find_backend(_index_lazily(source, key))
                if located is not None:
                    found.append(located)
        else:
            located = find_backend(data)
            if located is not None:
                found.append(located)
    return found


def backend_arrays(obj: xr.Dataset | xr.DataArray) -> list[Any]:
    """Return the Rumi arrays computing ``obj`` reads, lazily indexed or dask-backed.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray

    Returns
    -------
    list of RumiBackendArray
        One per read (a dask-backed variable gives one per chunk read).
    """
    return [array for array, _ in _reads(obj)]


def _index_lazily(source: Any, key: Any) -> Any:
    """Apply a dask getter's key to xarray's adapter the way ``getter`` does, lazily.

    xarray's adapters index lazily (they compose keys), so this reads
    nothing; a plain array would be returned as is.
    """
    try:
        return source[key]
    except Exception:  # not an xarray adapter (another library's array): not ours
        return None


class _RumiAccessor:
    """Rumi facts about a Dataset/DataArray opened with rumi_xarray."""

    def __init__(self, obj: xr.Dataset | xr.DataArray) -> None:
        self._obj = obj

    def _encoding(self) -> dict[str, Any]:
        variables = (self._obj.data_vars.values() if isinstance(self._obj, xr.Dataset)
                     else [self._obj])
        for var in variables:
            if "rumi_header" in var.encoding:
                return dict(var.encoding)
        raise RumiArgumentError("this object is not backed by a Rumi file opened with "
                                "rumi_xarray (no rumi_header in its variables' encoding)")

    @property
    def header(self) -> bytes:
        """Return the external header of the (first) file."""
        return bytes(self._encoding()["rumi_header"])

    @property
    def tile(self) -> tuple[int, int]:
        """Return the nominal tile size ``(height, width)``."""
        height, width = self._encoding()["rumi_tile_size"]
        return int(height), int(width)

    @property
    def frame_layout(self) -> str:
        """Return the axis order inside one frame, e.g. ``"h w"`` or ``"t b h w"``."""
        return str(self._encoding()["rumi_frame_layout"])

    @property
    def index_order(self) -> tuple[str, ...]:
        """Return the axes the frame index walks inside a tile cell, outermost first."""
        return tuple(self._encoding()["rumi_index_order"])

    @property
    def frame_shape(self) -> dict[str, int]:
        """Return the extent of one frame per dimension."""
        return dict(self._encoding()["rumi_frame_shape"])

    @property
    def read_group(self) -> dict[str, int]:
        """Return the read group (xarray's ``preferred_chunks``) per dimension."""
        return dict(self._encoding()["preferred_chunks"])

    @property
    def overviews(self) -> list[int]:
        """Return the overview factors of the file, level 0 first (``[]``: none).

        Those ``xr.open_dataset(..., overview_level=k)`` opens, as
        :func:`rumi_xarray.overview_factors` lists them.
        """
        return list(self._encoding().get("rumi_overviews", ()))

    @property
    def overview_level(self) -> int | None:
        """Return the overview level this object was opened at (``None``: full resolution)."""
        level = self._encoding().get("rumi_overview_level")
        return None if level is None else int(level)

    @property
    def sources(self) -> list[str]:
        """Return the (credential-free) names of the files behind the object."""
        for array in backend_arrays(self._obj):
            return [s.describe() for s in array.cube.scenes]
        return [str(self._encoding()["source"])]

    def explain(self) -> Explanation:
        """Dry-run the reads computing this object would make.

        Returns
        -------
        Explanation

        Examples
        --------
        >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
        >>> print(ds.band_data.isel(time=0, band=2).rumi.explain())
        1 native read call(s), 1 window(s), 4 frame(s): ...
        """
        return explain(self._obj)

    def chips(self, starts: Any, size: int, **kwargs: Any) -> xr.DataArray:
        """Read chips as a labelled ``(chip, band, y, x)`` DataArray.

        See ``rumi_xarray.backend.chips.chips``: one ``read_many`` per
        batch (per scene-local date), each chip with its ``time``, pixel
        centres, bounds and CRS.

        Parameters
        ----------
        starts : array-like
            ``(n, 3)`` ``(time, row, col)`` of each chip's upper-left pixel.
        size : int
        **kwargs
            ``bands`` (labels), ``band_index`` (positions), ``boundless``,
            ``fill_value``, ``mask_and_scale`` (default False, the stored samples).

        Returns
        -------
        xarray.DataArray

        Examples
        --------
        >>> cube = rx.open_catalog("catalog.parquet")
        >>> chips = cube.rumi.chips([(0, 0, 0), (1, 64, 64)], 64)
        >>> chips.dims, chips.shape
        (('chip', 'band', 'y', 'x'), (2, 4, 64, 64))
        """
        from rumi_xarray.backend.chips import chips

        return chips(self._obj, starts, size, **kwargs)

    def explain_chips(self, starts: Any, size: int, **kwargs: Any) -> Explanation:
        """Dry-run :meth:`chips`: native calls, frames and bytes, with no I/O.

        Parameters
        ----------
        starts : array-like
        size : int
        **kwargs
            ``bands``, ``band_index``, ``boundless``.

        Returns
        -------
        Explanation

        Examples
        --------
        >>> cube = rx.open_catalog("catalog.parquet")
        >>> print(cube.rumi.explain_chips([(0, 0, 0), (1, 64, 64)], 64))
        1 native read call(s), 2 window(s), 8 frame(s): ...
        """
        from rumi_xarray.backend.chips import explain_chips

        return explain_chips(self._obj, starts, size, **kwargs)

    def explore(self, band: Any = None, time: Any = None, *, max_pixels: int = 1024,
                cmap: str = "viridis", percentiles: tuple[float, float] = (2.0, 98.0),
                size: int = 512) -> Any:
        """Explore the series in Jupyter: a date's map, a time slider, a clicked pixel's series.

        Returns a widget showing one date's map, read at the level that fits
        the view (an overview when the file has them, else every ``step``-th
        pixel of the full resolution, so at most ``max_pixels`` samples on the
        long side); a time slider labelled with the dates; a band menu
        (single bands with a colour map, RGB composites with a percentile
        stretch); zoom buttons (the mouse wheel zooms too). A click on the map
        plots the clicked pixel's full series, every date read in one planned
        read, with what that read cost (native calls, frames, compressed bytes
        and byte ranges, milliseconds). Works on one file (local or remote),
        a catalog cube (``rx.open_catalog``) and files stacked by
        ``xr.open_mfdataset``, opened lazily or with dask: the explorer reads
        through the lazy path either way.

        The widget is plain ipywidgets: images drawn in the kernel, mouse
        events from ipyevents, so it renders the same in JupyterLab, Notebook,
        VS Code and Voila without a plotting front-end extension (see
        ``rumi_xarray.backend.explorer``). Its methods (``show_date``,
        ``click``, ``select_pixel``, ``zoom``, ``figure``) do what the
        controls do, from code.

        Parameters
        ----------
        band : str or sequence of three str, optional
            A band label (``"B04"``) or common name (``"red"``) for one band
            with ``cmap``; three of them for an RGB composite. Default: red,
            green, blue when the bands have those common names, else the first.
        time : str, datetime or numpy.datetime64, optional
            The date shown first (the nearest one); default the first.
        max_pixels : int, default 1024
            Longest side of the map in samples.
        cmap : str, default "viridis"
            matplotlib colour map of single bands.
        percentiles : (float, float), default (2, 98)
            Stretch of the map, per band; made again when the bands or the
            view change, kept while the date changes so dates compare.
        size : int, default 512
            Displayed size of the map's longer side, in CSS pixels.

        Returns
        -------
        rumi_xarray.backend.explorer.Explorer
            An ``ipywidgets.VBox``.

        Raises
        ------
        RumiMissingDependencyError
            ipywidgets, ipyevents or matplotlib is missing: install the
            ``explore`` extra (``pip install 'rumi-xarray[explore]'``).

        Examples
        --------
        >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
        >>> explorer = ds.rumi.explore(band=("red", "green", "blue"))
        >>> explorer.select_pixel(40, 60)  # what a click on that pixel does
        >>> explorer.series.shape  # (time, band): one point per date and band
        (4, 3)
        >>> explorer.series_reading.calls
        1
        """
        from rumi_xarray.backend.explore import require_explore_extra

        require_explore_extra()  # before the widgets' module imports them
        from rumi_xarray.backend.explorer import explore

        return explore(self._obj, band=band, time=time, max_pixels=max_pixels, cmap=cmap,
                       percentiles=percentiles, size=size)

    def to_rumi(self, path: Any, **kwargs: Any) -> bytes:
        """Write this object as a Rumi file; see :func:`rumi_xarray.to_rumi`.

        Parameters
        ----------
        path : str or os.PathLike
        **kwargs
            Passed to :func:`rumi_xarray.to_rumi`.

        Returns
        -------
        bytes
            The header.

        Examples
        --------
        >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
        >>> header = ds.isel(time=[0]).rumi.to_rumi("first_date.rumi", tile_size=64)
        >>> xr.open_dataset("first_date.rumi", engine="rumi").sizes["time"]
        1
        """
        from rumi_xarray.write.to_rumi import to_rumi

        return to_rumi(self._obj, path, **kwargs)


@xr.register_dataset_accessor("rumi")
class RumiDatasetAccessor(_RumiAccessor):
    """``ds.rumi``: header, tile, frame layout, read group and ``explain()``."""


@xr.register_dataarray_accessor("rumi")
class RumiDataArrayAccessor(_RumiAccessor):
    """``da.rumi``: header, tile, frame layout, read group and ``explain()``."""
