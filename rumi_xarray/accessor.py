"""The ``.rumi`` accessor on Datasets and DataArrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import xarray as xr

from rumi_xarray import dataset, engine, lazy, reads, whole
from rumi_xarray.array import RumiBackendArray, selection
from rumi_xarray.graph import GroupedArray, GroupedReadLayer


@dataclass(frozen=True)
class Explanation:
    """What reading a selection would cost, planned by librumi without I/O.

    Attributes
    ----------
    calls : int
        Native read calls (one per group of neighbouring chunks).
    items : int
        Windows across those calls.
    frames : int
        Distinct frames the calls decode.
    compressed_bytes : int
        Bytes fetched from storage (sum of planned ranges).
    decoded_bytes : int
        Bytes the calls return.
    ranges : int
        Byte ranges planned.
    """

    calls: int
    items: int
    frames: int
    compressed_bytes: int
    decoded_bytes: int
    ranges: int

    def __str__(self) -> str:
        return (f"{self.calls} native read call(s), {self.items} window(s), {self.frames} "
                f"frame(s), {self.compressed_bytes:,} compressed bytes in {self.ranges} "
                f"range(s) -> {self.decoded_bytes:,} decoded bytes")


def _find_layers(data: Any) -> list[GroupedReadLayer]:
    """Return the grouped-read layers needed by a dask array, after culling."""
    keys = data.__dask_keys__()
    culled = data.__dask_graph__().cull(set(_flatten(keys)))
    return [layer for layer in culled.layers.values() if isinstance(layer, GroupedReadLayer)]


def _flatten(keys: Any) -> list[Any]:
    if isinstance(keys, list):
        return [k for sub in keys for k in _flatten(sub)]
    return [keys]


def _lazy_selections(var: xr.Variable) -> list[tuple[RumiBackendArray, lazy.Selection]]:
    """Return the selection a lazily indexed variable would read now."""
    from xarray.core import indexing

    inner: Any = var._data
    key = None
    while inner is not None and not isinstance(inner, RumiBackendArray):
        if isinstance(inner, indexing.LazilyIndexedArray):
            key = inner.key
        inner = getattr(inner, "array", None)
    if inner is None:
        return []
    if key is None:
        key = indexing.BasicIndexer((slice(None),) * len(inner.shape))
    sel, _, _ = selection(inner.cube.shape, inner.full_key(key.tuple))
    return [] if sel is None else [(inner, sel)]


def explain(obj: xr.Dataset | xr.DataArray) -> Explanation:
    """Dry-run the reads ``obj`` (lazy or dask-backed) would make.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray

    Returns
    -------
    Explanation
    """
    variables = obj.data_vars.values() if isinstance(obj, xr.Dataset) else [obj]
    calls = items = frames = compressed = decoded = nranges = 0
    for var in variables:
        data = var.variable._data
        planned: list[tuple[RumiBackendArray, list[reads.Call]]] = []
        if isinstance(data, GroupedArray) and not whole.distributed_default():
            # computing the array itself decodes the whole result in one call
            for layer in _find_layers(data):
                planned.append((layer.array, [whole.whole_call(layer.array)]))
        elif hasattr(data, "__dask_graph__"):
            for layer in _find_layers(data):
                planned.append((layer.array, list(layer.plan().calls)))
        else:
            for array, sel in _lazy_selections(var.variable):
                planned.append((array, lazy.calls(array.cube, sel)))
        for array, planned_calls in planned:
            cube = array.cube
            for call in planned_calls:
                calls += 1
                items += len(call.scenes)
                decoded += (len(call.scenes) * call.nbytes_per_item
                            * cube.grid.dtype.itemsize)
                for s, r, c in zip(call.scenes, call.rows, call.cols, strict=True):
                    ranges = engine.plan_ranges(cube.scenes[s], call.times, call.bands,
                                                r, c, call.height, call.width)
                    frames += len(ranges)
                    nranges += len(ranges)
                    compressed += sum(length for _, length in ranges)
    return Explanation(calls=calls, items=items, frames=frames, compressed_bytes=compressed,
                       decoded_bytes=decoded, ranges=nranges)


class _RumiAccessor:
    """Rumi facts about a Dataset/DataArray opened with rumi_xarray."""

    def __init__(self, obj: xr.Dataset | xr.DataArray) -> None:
        self._obj = obj

    def _array(self) -> RumiBackendArray:
        found = dataset.backend_arrays(self._obj)
        if not found:
            variables = (self._obj.data_vars.values() if isinstance(self._obj, xr.Dataset)
                         else [self._obj])
            for var in variables:
                data = var.variable._data
                if hasattr(data, "__dask_graph__"):
                    layers = [ly for ly in data.__dask_graph__().layers.values()
                              if isinstance(ly, GroupedReadLayer)]
                    found.extend(ly.array for ly in layers)
        if not found:
            raise ValueError("this object is not backed by a Rumi file opened with rumi_xarray")
        return found[0]

    @property
    def header(self) -> bytes:
        """Return the external header of the (first) file."""
        return self._array().cube.scenes[0].header

    @property
    def tile(self) -> tuple[int, int]:
        """Return the nominal tile size ``(height, width)``."""
        g = self._array().cube.grid
        return (g.tile_height, g.tile_width)

    @property
    def frame_layout(self) -> str:
        """Return the axis order inside one frame, e.g. ``"h w"`` or ``"t b h w"``."""
        return self._array().cube.grid.frame_layout

    @property
    def index_order(self) -> tuple[str, ...]:
        """Return the axes the frame index walks, outermost first."""
        return self._array().cube.grid.index_order

    @property
    def sources(self) -> list[str]:
        """Return the (credential-free) names of the files behind the object."""
        return [s.describe() for s in self._array().cube.scenes]

    def explain(self) -> Explanation:
        """Dry-run the current selection: calls, frames and compressed bytes.

        Returns
        -------
        Explanation
        """
        return explain(self._obj)

    def to_rumi(self, path: Any, **kwargs: Any) -> bytes:
        """Write this object as a Rumi file; see :func:`rumi_xarray.to_rumi`.

        Parameters
        ----------
        path : str or os.PathLike
        **kwargs
            Passed to :func:`rumi_xarray.writer.to_rumi`.

        Returns
        -------
        bytes
            The header.
        """
        from rumi_xarray.writer import to_rumi

        return to_rumi(self._obj, path, **kwargs)


@xr.register_dataset_accessor("rumi")
class RumiDatasetAccessor(_RumiAccessor):
    """``ds.rumi``: header, tile, frame layout and ``explain()``."""


@xr.register_dataarray_accessor("rumi")
class RumiDataArrayAccessor(_RumiAccessor):
    """``da.rumi``: header, tile, frame layout and ``explain()``."""


__all__ = ["Explanation", "RumiDataArrayAccessor", "RumiDatasetAccessor", "explain"]
