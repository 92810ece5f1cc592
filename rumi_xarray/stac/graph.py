"""The dask graph of a STAC load across grids: one task per output chunk.

Built from public dask API only, and identical in dask's legacy graphs and
its array query-planning mode:

- the :class:`~rumi_xarray.stac.plan.Load` (a
  :class:`~rumi_xarray.stac.plan.LoadPlan`: every Item, its header, the
  output grid, the time groups; or a
  :class:`~rumi_xarray.stac.archive.TableLoad`: the table it looks Items up
  in) is wrapped in :class:`BlockPlans`, an array-like of object dtype with
  one element per output chunk, and put in the graph once with
  ``dask.array.from_array`` (one key, however many chunks read it);
- ``dask.array.map_blocks`` over it makes the output ``(time, band, y, x)``
  array: each chunk's task takes its element (the chunk's
  :class:`~rumi_xarray.stac.plan.BlockPlan`, planned where the task runs)
  and produces the pixels with :func:`rumi_xarray.stac.mosaic.load_block`:
  one native call per source group, odc-geo reprojection, first-valid-pixel
  mosaic.

``explain()`` finds the ``from_array`` getters of this graph exactly as it
finds Rumi variables' own reads, and asks :meth:`BlockPlans.planned_reads`
for the calls each one will make.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from rumi_xarray.stac import mosaic
from rumi_xarray.stac.plan import BlockPlan, Load, PlannedRead


class BlockPlans:
    """Array-like ``(time, band, y, x)`` chunks -> block plans of a load.

    Indexing it with one block's slices returns a ``(1, 1, 1, 1)`` object array
    holding that block's :class:`~rumi_xarray.stac.plan.BlockPlan`. Only the
    :class:`~rumi_xarray.stac.plan.Load` is stored (and pickled), so the
    graph carries the Items (or the table's name) once.

    Parameters
    ----------
    load : Load
    """

    def __init__(self, load: Load) -> None:
        self.load = load
        self.shape = load.numblocks
        self.ndim = 4
        self.dtype = np.dtype(object)

    def __getitem__(self, key: Any) -> np.ndarray:
        out = np.empty((1, 1, 1, 1), dtype=object)
        out[0, 0, 0, 0] = self._plan(*self._block(key))
        return out

    def _block(self, key: Any) -> tuple[int, int, int, int]:
        if not isinstance(key, tuple) or len(key) != 4:
            raise IndexError(f"a STAC load's block plans take one index per axis, got {key!r}")
        index = []
        for k, n in zip(key, self.shape, strict=True):
            if isinstance(k, slice):
                start, stop, _ = k.indices(n)
                if stop - start != 1:
                    raise IndexError(f"block plans are read one block at a time, got {key!r}")
                index.append(start)
            else:
                index.append(int(k))
        return index[0], index[1], index[2], index[3]

    def planned_reads(self, key: Any) -> list[tuple[PlannedRead, None]]:
        """Return the native calls the block at ``key`` will make (``explain()``).

        Parameters
        ----------
        key : tuple
            The index a getter task passes.

        Returns
        -------
        list of (PlannedRead, None)
            Each with ``cube`` and ``planned_calls()``, like a Rumi backend
            array with no selection.
        """
        return [(read, None) for read in self._plan(*self._block(key)).reads]

    def _plan(self, it: int, ib: int, iy: int, ix: int) -> BlockPlan:
        """Plan one block: from the open-time plan, or by a table lookup now (archives)."""
        return self.load.block_plan(it, ib, iy, ix)

    def __repr__(self) -> str:
        return f"BlockPlans({self.load.token}, blocks={self.shape})"


def _load(plans: np.ndarray) -> np.ndarray:
    return mosaic.load_block(plans.reshape(-1)[0])


def load_array(load: Load) -> Any:
    """Return the ``(time, band, y, x)`` dask array of a reprojecting STAC load.

    Parameters
    ----------
    load : Load

    Returns
    -------
    dask.array.Array
        Chunks ``load.chunks``.
    """
    plans = da.from_array(BlockPlans(load), chunks=1, asarray=False, inline_array=False,
                          name=f"rumi-stac-plan-{load.token}",
                          meta=np.empty((0, 0, 0, 0), dtype=object))
    return da.map_blocks(_load, plans, chunks=load.chunks, dtype=load.dtype,
                         meta=np.empty((0, 0, 0, 0), dtype=load.dtype),
                         name=f"rumi-stac-{load.token}")
