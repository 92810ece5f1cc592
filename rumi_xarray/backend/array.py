"""The lazily indexed backend array over a cube: one routed read per access."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from xarray.backends import BackendArray
from xarray.core import indexing

from rumi_xarray import progress as bars
from rumi_xarray.backend import execute
from rumi_xarray.backend.route import Route, route_outer, route_points
from rumi_xarray.errors import RumiSelectionError
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.planning import Call
from rumi_xarray.model.selection import Points, Selection, points, selection

#: Whether this process has installed the optimizer that fuses selections into reads.
_fusing = False


@dataclass(eq=False)
class LazyRead:
    """One access of a :class:`RumiBackendArray`: what it selects and how it finishes.

    Attributes
    ----------
    cube : Cube
    outer : Selection or None
        Set for OUTER and basic keys (``None`` when empty or pointwise).
    points : Points or None
        Set for VECTORIZED keys (``None`` when empty or outer).
    out_shape : tuple of int
        Result shape before integer-indexed axes are dropped.
    drop : tuple of bool
        Per cube axis ``(time, band, y, x)``: indexed by an integer (OUTER).
    """

    cube: Cube
    outer: Selection | None
    points: Points | None
    out_shape: tuple[int, ...]
    drop: tuple[bool, ...]

    def route(self, *, commit: bool, progress: bool) -> Route | None:
        """Return how this access reads now (``None``: it selects nothing).

        Parameters
        ----------
        commit : bool
            Let the tile cache remember this access (``False`` for ``explain()``).
        progress : bool
            Whether large window reads run in slices for a progress bar
            (:func:`rumi_xarray.progress.sliced_reads`).

        Returns
        -------
        Route or None
        """
        if self.outer is not None:
            return route_outer(self.cube, self.outer, commit=commit, progress=progress)
        if self.points is not None:
            return route_points(self.cube, self.points, commit=commit, progress=progress)
        return None

    def run(self, route: Route | None = None) -> np.ndarray:
        """Read and return the result.

        Parameters
        ----------
        route : Route, optional
            From :meth:`route` with ``commit=True``; computed when omitted.

        Returns
        -------
        numpy.ndarray
        """
        if self.points is not None:
            return execute.read_points(self.cube, self.points, route)
        if self.outer is None:
            return self.finish(np.empty(self.out_shape, dtype=self.cube.grid.dtype))
        return self.finish(execute.read_outer(self.cube, self.outer, route))

    def finish_window(self, block: np.ndarray) -> np.ndarray:
        """Return the result from the block of this (dense OUTER) access's window.

        Parameters
        ----------
        block : numpy.ndarray
            ``(times, bands, height, width)`` of :meth:`Selection.window`.

        Returns
        -------
        numpy.ndarray
        """
        assert self.outer is not None
        return self.finish(execute.orient(self.outer, block))

    def finish(self, data: np.ndarray) -> np.ndarray:
        """Restore repeated time steps/bands and drop integer-indexed axes.

        Parameters
        ----------
        data : numpy.ndarray
            ``(times, bands, ys, xs)`` as :func:`execute.read_outer` returns it.

        Returns
        -------
        numpy.ndarray
        """
        sel = self.outer
        if sel is not None and sel.t_take is not None:
            data = np.take(data, sel.t_take, axis=0)
        if sel is not None and sel.b_take is not None:
            data = np.take(data, sel.b_take, axis=1)
        squeeze = tuple(axis for axis in range(4) if self.drop[axis])
        return data.squeeze(axis=squeeze) if squeeze else data


class RumiBackendArray(BackendArray):
    """Lazily indexed view of a cube ``(time, band, y, x)``, or of one of its bands.

    Supports xarray's VECTORIZED indexing directly: OUTER keys (integers,
    slices with any step and integer arrays on every dimension, negative
    indices included) and pointwise keys (``isel(y=DataArray, x=DataArray)``,
    integer arrays broadcast against each other). Each access is one routed
    read (:mod:`rumi_xarray.backend.route`): a window is one native call
    straight into the result; scattered rows and columns, and points, read
    only the tile cells that hold a selected pixel, each once. The array
    holds only picklable descriptions (paths, headers), so it is thread-safe
    and travels to dask workers: when xarray chunks a variable, every dask
    chunk is one call to this array. ``async_getitem`` reads off the event
    loop and lets loads awaited together share native calls
    (:mod:`rumi_xarray.backend.aio`).

    Parameters
    ----------
    cube : Cube
    band : int, optional
        Expose only this band (``band_as_variable=True``); ``band`` is then
        not a dimension.
    """

    #: The key kinds ``__getitem__`` takes as they are (xarray never needs to
    #: decompose a key into a backend read plus numpy indexing).
    indexing_support = indexing.IndexingSupport.VECTORIZED
    #: Marks this class to :mod:`rumi_xarray.dask.optimize`, which folds chains
    #: of dask selections into reads of arrays of this class only.
    rumi_backend_array = True

    def __init__(self, cube: Cube, band: int | None = None) -> None:
        self.cube = cube
        self.band = band
        t, b, y, x = cube.shape
        self._shape: tuple[int, ...] = (t, y, x) if band is not None else (t, b, y, x)
        self.dtype = cube.grid.dtype
        #: One read group per dimension (``encoding["preferred_chunks"]``), set
        #: by the dataset builder; dask reads of chunks that tile part of one
        #: group are made one read (:mod:`rumi_xarray.dask.optimize`). Along time
        #: of a ragged cube, the size of each scene's group.
        self.read_group: tuple[int | tuple[int, ...], ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        """Return the array's shape (and, once dask is imported, make selections fuse).

        ``dask.array.from_array`` reads the shape when xarray chunks a
        variable: that is the first moment a Rumi dask array exists, and the
        one where :func:`rumi_xarray.dask.optimize.install` sets dask's array
        optimizer so that chains of selections reach the read. Never at
        import, and never in a process that has not imported dask.
        """
        global _fusing
        if not _fusing and "dask.array" in sys.modules:
            from rumi_xarray.dask import optimize

            optimize.install()
            _fusing = True
        return self._shape

    @property
    def dims(self) -> tuple[str, ...]:
        """Return the dimension names, matching :attr:`shape`."""
        return ("time", "y", "x") if self.band is not None else ("time", "band", "y", "x")

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return self.lazy_read(key).run()

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        """Read ``self[key]`` off the event loop, batched with loads awaited alongside.

        Parameters
        ----------
        key : ExplicitIndexer

        Returns
        -------
        numpy.ndarray
        """
        from rumi_xarray.backend import aio

        return await aio.submit(self, key)

    def full_key(self, key: tuple[Any, ...]) -> tuple[Any, Any, Any, Any]:
        """Return the ``(time, band, y, x)`` key for a key over :attr:`dims`.

        Parameters
        ----------
        key : tuple
            One int, slice or integer array per dimension.

        Returns
        -------
        tuple
        """
        if self.band is None:
            return (key[0], key[1], key[2], key[3])
        return (key[0], self.band, key[1], key[2])

    def lazy_read(self, key: indexing.ExplicitIndexer | None) -> LazyRead:
        """Return what ``self[key]`` selects, without reading.

        Parameters
        ----------
        key : ExplicitIndexer or None
            ``None`` selects the whole array.

        Returns
        -------
        LazyRead

        Raises
        ------
        RumiSelectionError
            A position is out of range or not an integer.
        """
        if key is None:
            key = indexing.BasicIndexer((slice(None),) * len(self.shape))
        full = self.full_key(key.tuple)
        try:
            if isinstance(key, indexing.VectorizedIndexer):
                pts, shape = points(self.cube.shape, full)
                return LazyRead(self.cube, None, pts, shape, (False,) * 4)
            if not isinstance(key, indexing.BasicIndexer | indexing.OuterIndexer):
                raise TypeError(f"unexpected key type {type(key).__name__}")
            sel, shape, drop = selection(self.cube.shape, full)
            return LazyRead(self.cube, sel, None, shape, tuple(drop))
        except IndexError as exc:
            raise RumiSelectionError(
                f"{self.cube.name}: selection {key.tuple!r} is out of range for shape "
                f"{self.shape} {self.dims}: {exc}") from exc

    def planned_calls(self, key: indexing.ExplicitIndexer | None = None, *,
                      progress: bool | None = None) -> list[Call]:
        """Return the native calls ``self[key]`` would make now (``explain()``).

        Reads the tile cache without changing it, so the calls are exactly
        those the next ``self[key]`` makes with the same progress setting.

        Parameters
        ----------
        key : ExplicitIndexer, optional
            ``None`` reads the whole array.
        progress : bool, optional
            Whether large reads run in slices for a progress bar; ``None``:
            the ``progress`` option (:func:`rumi_xarray.progress.sliced_reads`).

        Returns
        -------
        list of Call
        """
        shown = bars.sliced_reads() if progress is None else progress
        route = self.lazy_read(key).route(commit=False, progress=shown)
        return [] if route is None else route.calls
