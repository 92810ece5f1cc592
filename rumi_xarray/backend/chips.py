"""Chips for models: ``rx.read_chips``, ``rx.explain_chips`` and ``.rumi.chips``.

A batch of chips (one size, one band selection, any dates and scenes) is
batched by :mod:`rumi_xarray.model.chips` and read by one ``rumi.read_many``
per scene-local date, straight into the output (numpy) or into librumi's own
allocation handed over through DLPack (``framework="torch"`` ...), so a
batch from single-date scenes costs one native call and no copy.

:class:`ChipSource` is what a cube opened by any of our opens (one file,
``open_mfdataset``, a catalog, one-grid STAC; lazy or chunked) says about
chips: its :class:`~rumi_xarray.model.cube.Cube` (paths and headers), band
names, time labels, pixel-centre coordinates, transform, CRS and CF facts.
It pickles small (no array), so torch datasets carry it to workers.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.backend.array import RumiBackendArray
from rumi_xarray.backend.wrappers import find_backend
from rumi_xarray.conventions import decoding
from rumi_xarray.errors import RumiSelectionError, RumiUnsupportedError
from rumi_xarray.model.chips import ChipBatch, as_starts, batch_chips
from rumi_xarray.model.costs import Explanation
from rumi_xarray.model.cube import Cube

__all__ = ["ChipSource", "chip_source", "chips", "explain_chips", "read_chips"]

#: Names of a chip's bounds, in rasterio's order.
BOUNDS = ("minx", "miny", "maxx", "maxy")


@dataclass(frozen=True, eq=False)
class ChipSource:
    """What chips need from a cube: scenes, labels, georeferencing, CF facts.

    Attributes
    ----------
    cube : Cube
        Paths and headers of every scene (what a read needs).
    times : numpy.ndarray
        Cube time position of each time step of the object (a time selection
        of the cube keeps its own positions).
    bands : tuple of int
        Cube band position of each band of the object.
    band_names : tuple of str
    time_values : numpy.ndarray
        The object's ``time`` labels.
    x, y : numpy.ndarray or None
        1-D pixel-centre coordinates of the whole raster.
    transform : tuple of float or None
        GDAL GeoTransform (corner based) of the raster.
    crs : str or None
        CRS as WKT.
    cf : dict
        ``_FillValue``, ``scale_factor``, ``add_offset`` as stored.
    name : str
        The variable's name (``band_data``) or the Dataset's variables.
    """

    cube: Cube
    times: np.ndarray
    bands: tuple[int, ...]
    band_names: tuple[str, ...]
    time_values: np.ndarray
    x: np.ndarray | None = field(repr=False)
    y: np.ndarray | None = field(repr=False)
    transform: tuple[float, ...] | None
    crs: str | None = field(repr=False)
    cf: dict[str, Any]
    name: str

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """Return the object's ``(time, band, y, x)`` extent."""
        _, _, height, width = self.cube.shape
        return (len(self.times), len(self.bands), height, width)

    @property
    def dtype(self) -> np.dtype:
        """Return the stored sample type."""
        return self.cube.grid.dtype

    @property
    def nodata(self) -> Any:
        """Return the stored nodata value, or ``None``."""
        return self.cf.get("_FillValue", self.cf.get("missing_value"))

    def band_positions(self, bands: Any = None, band_index: Any = None) -> tuple[int, ...]:
        """Return cube band positions of a selection by label or by object position.

        Parameters
        ----------
        bands : None, hashable or sequence
            Labels, as the object's ``band`` coordinate (or its band
            variables) names them: short names, or 1..n for unnamed bands
            (:func:`rumi_xarray.conventions.decoding.select_bands`).
        band_index : None, int or sequence of int
            0-based positions along the object's ``band``.

        Returns
        -------
        tuple of int

        Raises
        ------
        RumiSelectionError
            An unknown label, a position out of range, or an empty selection.
        """
        chosen = decoding.select_bands(self.band_names, bands, band_index, self.cube.name)
        return tuple(self.bands[i] for i in chosen)

    def band_values(self, positions: tuple[int, ...]) -> np.ndarray:
        """Return the ``band`` labels of cube band positions (1..n for unnamed bands)."""
        names = [self.band_names[self.bands.index(b)] for b in positions]
        return decoding.band_labels(names, names)

    def cube_starts(self, starts: Any) -> np.ndarray:
        """Return ``(n, 3)`` chip starts in cube time positions.

        Parameters
        ----------
        starts : array-like
            ``(n, 3)`` ``(time, row, col)`` positions in the object.

        Returns
        -------
        numpy.ndarray
        """
        array = as_starts(starts)
        t = array[:, 0]
        bad = np.flatnonzero((t < 0) | (t >= len(self.times)))
        if bad.size:
            i = int(bad[0])
            raise RumiSelectionError(
                f"{self.cube.name}: chip {i} starts at time {int(t[i])}, outside the "
                f"{len(self.times)} time step(s)")
        out = array.copy()
        out[:, 0] = self.times[t]
        return out

    def scene_of(self, t: int) -> str:
        """Return the name of the scene holding object time step ``t``."""
        return self.cube.scenes[self.cube.steps[int(self.times[t])][0]].describe()


def chip_source(obj: Any) -> ChipSource:
    """Return what chips need from a cube opened by rumi_xarray.

    Parameters
    ----------
    obj : xarray.Dataset, xarray.DataArray or ChipSource
        ``band_data(time, band, y, x)`` (or a Dataset holding it, or one with
        a variable per band), lazy or dask-backed, whole in ``y``/``x``;
        selections along ``time`` and ``band`` are kept.

    Returns
    -------
    ChipSource

    Raises
    ------
    RumiUnsupportedError
        The object is not backed by Rumi files, or was selected in ``y``/``x``.
    """
    if isinstance(obj, ChipSource):
        return obj
    if isinstance(obj, xr.Dataset):
        if "band_data" in obj.data_vars:
            return _from_dataarray(obj["band_data"], obj)
        return _from_band_variables(obj)
    if isinstance(obj, xr.DataArray):
        return _from_dataarray(obj, obj)
    raise RumiUnsupportedError(f"chips come from a Dataset or DataArray opened by rumi_xarray, "
                               f"not {type(obj).__name__}")


def backend_of(var: xr.DataArray, what: str = "chips") -> tuple[RumiBackendArray, Any]:
    """Return the Rumi array under a variable, lazy or dask-backed, and its key.

    Chips and the explorer read from this array directly, whatever path the
    variable was opened on.

    Parameters
    ----------
    var : xarray.DataArray
    what : str, default "chips"
        What is read from it, named in the error a dask selection raises.

    Returns
    -------
    tuple
        ``(array, key)``: the key selected on it lazily, ``None`` for the whole array.

    Raises
    ------
    RumiUnsupportedError
        ``var`` is not backed by Rumi files, or is a dask selection of one.
    """
    data = var.variable._data
    if hasattr(data, "__dask_graph__"):
        from rumi_xarray.dask.graphs import getter_calls

        arrays = _arrays_in(getter_calls(data))
        if len(arrays) == 1 and tuple(data.shape) == tuple(arrays[0].shape):
            return arrays[0], None
        if len(arrays) > 1 and var.dims and var.dims[0] == "time":
            # Files stacked along time by xr.open_mfdataset: one cube of their scenes.
            return _stacked(data, tuple(str(d) for d in var.dims)), None
        if arrays:
            raise RumiUnsupportedError(
                f"{arrays[0].cube.name}: {what} are read from the cube as opened (chunked "
                f"{tuple(data.shape)} is a selection of {tuple(arrays[0].shape)}); select "
                f"before chunking, or take {what} from the whole cube")
    else:
        located = find_backend(data)
        if located is not None:
            return located
    raise RumiUnsupportedError(
        f"{var.name!r} is not backed by Rumi files opened with rumi_xarray (open it with "
        f"xr.open_dataset(..., engine='rumi'), rx.open_catalog or rx.open_mfdataset)")


def _arrays_in(calls: list[tuple[Any, Any]]) -> list[RumiBackendArray]:
    """Return the distinct Rumi arrays a dask array's reads come from, in order found."""
    arrays: list[RumiBackendArray] = []
    for source, _ in calls:
        located = find_backend(source)
        if located is not None and not any(located[0] is a for a in arrays):
            arrays.append(located[0])
    return arrays


def _stacked(data: Any, dims: tuple[str, ...]) -> RumiBackendArray:
    """Return one Rumi array over files a dask array stacks along time, in its order.

    ``xr.open_mfdataset(..., engine="rumi")`` concatenates one array per file;
    each time block of the result must read one whole file (its every band,
    row and column), and the files must share size, tiles, bands and dtype.
    Files of other numbers of dates or frame layouts (series files of
    periods) make a ragged cube: a batch of chips is then one ``read_many``
    per layout.
    """
    from rumi_xarray.dask.graphs import getter_calls

    scenes: list[Any] = []
    grids: list[Any] = []
    steps: list[tuple[int, int]] = []
    first: RumiBackendArray | None = None
    for i in range(len(data.chunks[0])):
        block = data.blocks[i]
        arrays = _arrays_in(getter_calls(block))
        array = arrays[0] if len(arrays) == 1 else None
        if (array is None or array.band is not None or array.dims != dims
                or tuple(block.shape) != tuple(array.shape)):
            raise RumiUnsupportedError(
                f"chips are read from whole files stacked along time; time block {i} of "
                f"this {tuple(data.shape)} array reads "
                f"{'several files' if len(arrays) > 1 else 'a selection of a file'}: take "
                f"chips from the cube as opened (or open it with rx.open_mfdataset)")
        if first is None:
            first = array
        elif (array.cube.grid.stack_key != first.cube.grid.stack_key
              or array.shape[1:] != first.shape[1:]):
            raise RumiUnsupportedError(
                f"{array.cube.name} does not share the tiles, bands and dtype of "
                f"{first.cube.name}: chips from both are not one read")
        offset = len(scenes)
        scenes.extend(array.cube.scenes)
        grids.extend(array.cube.scene_grid(s) for s in range(len(array.cube.scenes)))
        steps.extend((offset + s, t) for s, t in array.cube.steps)
    assert first is not None  # a dask array has at least one block
    ragged = any(not g.same_layout(grids[0]) for g in grids)
    if ragged:
        scenes = [replace(scene, grid=g) for scene, g in zip(scenes, grids, strict=True)]
    cube = Cube(tuple(scenes), grids[0], tuple(steps), ragged=ragged)
    return RumiBackendArray(cube)


def selected_positions(key: Any, dims: tuple[str, ...], shape: tuple[int, ...]
                       ) -> dict[str, np.ndarray]:
    """Return, per dimension, the array position of each position of the selection.

    Parameters
    ----------
    key : ExplicitIndexer or None
        From ``backend_of`` (``None``: the whole array).
    dims : tuple of str
    shape : tuple of int
        The array's dimensions and shape.

    Returns
    -------
    dict
        Dimension -> positions (int arrays).

    Raises
    ------
    RumiUnsupportedError
        A pointwise key, or an integer that dropped a dimension.
    """
    full = {d: np.arange(n) for d, n in zip(dims, shape, strict=True)}
    if key is None:
        return full
    from xarray.core import indexing

    if not isinstance(key, indexing.BasicIndexer | indexing.OuterIndexer):
        raise RumiUnsupportedError("chips are read from a cube selected by slices or lists, "
                                   "not pointwise")
    out = {}
    for d, k in zip(dims, key.tuple, strict=True):
        if isinstance(k, (int, np.integer)):
            raise RumiUnsupportedError(f"chips need the {d!r} dimension; select it with a "
                                       f"list or slice, not an integer")
        out[d] = full[d][k]
    return out


def _from_dataarray(da: xr.DataArray, ds: xr.Dataset | xr.DataArray) -> ChipSource:
    array, key = backend_of(da)
    if array.band is not None:
        raise RumiUnsupportedError(f"{da.name!r} holds one band: take chips from the Dataset "
                                   f"of band variables")
    pos = selected_positions(key, array.dims, array.shape)
    _check_whole_space(array.cube, pos)
    names = (tuple(str(b) for b in da["band"].values) if "band" in da.coords
             else tuple(str(b) for b in range(len(pos["band"]))))
    return _source(array.cube, pos["time"], tuple(int(b) for b in pos["band"]), names, da, ds,
                   str(da.name))


def _from_band_variables(ds: xr.Dataset) -> ChipSource:
    bands, names = [], []
    cube, times = None, None
    first = None
    for name, var in ds.data_vars.items():
        try:
            array, key = backend_of(var)
        except RumiUnsupportedError:
            continue
        if array.band is None:
            continue
        pos = selected_positions(key, array.dims, array.shape)
        if cube is None:
            cube, times, first = array.cube, pos["time"], var
            _check_whole_space(cube, pos)
        elif array.cube is not cube or not np.array_equal(pos["time"], np.asarray(times)):
            continue
        bands.append(array.band)
        names.append(str(name))
    if cube is None or times is None or first is None:
        raise RumiUnsupportedError("this Dataset holds no variable backed by Rumi files opened "
                                   "with rumi_xarray")
    return _source(cube, times, tuple(bands), tuple(names), first, ds,
                   ", ".join(names))


def _check_whole_space(cube: Cube, pos: dict[str, np.ndarray]) -> None:
    _, _, height, width = cube.shape
    if (not np.array_equal(pos["y"], np.arange(height))
            or not np.array_equal(pos["x"], np.arange(width))):
        raise RumiUnsupportedError(
            f"{cube.name}: chips are positioned in the whole raster ({height}x{width}); "
            f"select time and bands freely, but not y/x (pass row/col offsets instead)")


def _source(cube: Cube, times: np.ndarray, bands: tuple[int, ...], names: tuple[str, ...],
            da: xr.DataArray, ds: xr.Dataset | xr.DataArray, name: str) -> ChipSource:
    # GDAL's scale 1 and offset 0 a Dataset shows are never applied (conventions/attributes).
    packing = decoding.applied_packing(da.attrs, da.encoding)
    coords = ds.coords
    x = np.asarray(coords["x"].values) if "x" in coords and coords["x"].ndim == 1 else None
    y = np.asarray(coords["y"].values) if "y" in coords and coords["y"].ndim == 1 else None
    transform = crs = None
    if "spatial_ref" in coords:
        attrs = coords["spatial_ref"].attrs
        crs = attrs.get("crs_wkt")
        gt = attrs.get("GeoTransform")
        if gt:
            transform = tuple(float(v) for v in str(gt).split())
    time_values = (np.asarray(coords["time"].values) if "time" in coords
                   else np.arange(len(times)))
    return ChipSource(cube=cube, times=np.asarray(times, dtype=np.int64), bands=bands,
                      band_names=names, time_values=time_values, x=x, y=y,
                      transform=transform, crs=crs, cf=packing, name=name)


# --- reading ---------------------------------------------------------------------


def read_chips(cube: Any, starts: Any, size: int, *, bands: Any = None,
               band_index: Any = None, framework: str = "numpy", boundless: bool = False,
               fill_value: Any = None, mask_and_scale: bool | None = False,
               out: np.ndarray | None = None) -> Any:
    """Read ``n`` chips of ``size`` x ``size`` pixels in as few native calls as possible.

    Chips sharing a scene-local date are read by ONE ``rumi.read_many``:
    windows across any number of scenes in one plan and one transport
    submission. A batch from single-date scenes (a catalog, ``open_mfdataset``,
    STAC items on one grid) is therefore one call whatever its size; chips
    from a multi-date file cost one call per distinct date (one in all when a
    frame holds every date). Every chip equals ``rumi.read`` of its window,
    bit for bit.

    Parameters
    ----------
    cube : xarray.Dataset, xarray.DataArray or ChipSource
        Opened by ``xr.open_dataset(engine="rumi")``, ``rx.open_dataset``,
        ``rx.open_mfdataset``, ``rx.open_catalog`` or ``rx.open_stac`` (items
        on one grid), lazy or chunked; a selection along ``time`` or ``band``
        is kept, ``y``/``x`` must be whole.
    starts : array-like
        ``(n, 3)`` integer ``(time, row, col)`` of each chip's upper-left
        pixel: positions along the object's ``time``, ``y`` and ``x``.
    size : int
        Chip height and width in pixels.
    bands : hashable or sequence, optional
        Band labels, as ``.sel(band=...)`` takes them: short names, or 1..n
        for unnamed bands; default every band.
    band_index : int or sequence of int, optional
        0-based positions along ``band`` instead (as ``.isel(band=...)``).
    framework : {"numpy", "torch", "jax", "tensorflow", "dlpack"}, default "numpy"
        Array type returned. A batch read by one call is librumi's own
        allocation handed over through DLPack (no copy); one assembled from
        several calls is one numpy buffer handed over the same way.
    boundless : bool, default False
        Let chips cross the raster's edge; what lies outside is
        ``fill_value``. Without it such a chip raises.
    fill_value : scalar, optional
        Value outside the raster; default the nodata value (``_FillValue``),
        else 0 (as rasterio's boundless reads). NaN under ``mask_and_scale``.
    mask_and_scale : bool or None, default False
        As on every door (``docs/guide/nodata-cf.md``): False the stored
        samples; None xarray's CF decoding (nodata -> NaN, scale and offset
        applied where the file has them), as ``xr.open_dataset(engine="rumi")``
        gives by default; True rioxarray's masked floats (float32 up to
        16-bit samples, float64 above), as ``xr.open_dataset(...,
        mask_and_scale=True)``.
    out : numpy.ndarray, optional
        C-contiguous ``(n, band, size, size)`` destination of the stored
        dtype (e.g. a view of a shared-memory tensor): librumi decodes into
        it and it is returned (``framework`` must be "numpy" and
        ``mask_and_scale`` one that leaves the samples as stored).

    Returns
    -------
    array
        ``(n, band, size, size)``.

    Raises
    ------
    RumiSelectionError
        A chip out of range (naming it and its scene), a zero size, an empty
        or mixed band selection.
    RumiIOError, RumiFileNotFoundError, RumiFormatError
        The read failed; the message names the scene and window involved.

    Examples
    --------
    >>> cube = rx.open_catalog("catalog.parquet")
    >>> chips = rx.read_chips(cube, [(0, 0, 0), (1, 64, 64)], 64, bands=["B04", "B08"])
    >>> chips.shape, chips.dtype
    ((2, 2, 64, 64), dtype('uint16'))
    """
    source = chip_source(cube)
    if framework not in _frameworks():
        raise RumiSelectionError(f"framework must be one of {_frameworks()}, got {framework!r}")
    mask_and_scale = decoding.check_mask_and_scale(mask_and_scale, "read_chips")
    batch = _batch(source, starts, size, bands, boundless, band_index)
    decodes = decoding.changes_samples(source.dtype, source.cf, mask_and_scale)
    if out is not None:
        shape = (batch.n, len(batch.bands), batch.size, batch.size)
        if (framework != "numpy" or decodes or out.shape != shape
                or out.dtype != source.dtype or not out.flags.c_contiguous):
            raise RumiSelectionError(
                f"out= must be a C-contiguous {shape} {source.dtype} numpy array (raw samples, "
                f"framework='numpy'), got {out.shape} {out.dtype}")
        return _execute(source, batch, "numpy", fill_value=_raw_fill(source, fill_value, False),
                        out=out)
    if decodes:
        raw = _execute(source, batch, "numpy", fill_value=_raw_fill(source, fill_value, True))
        decoded = _decode(source, raw, fill_value, mask_and_scale)
        return _adopt(decoded, framework)
    return _execute(source, batch, framework, fill_value=_raw_fill(source, fill_value, False))


def _frameworks() -> tuple[str, ...]:
    from rumi_xarray.native.reads import FRAMEWORKS

    return FRAMEWORKS


def _adopt(array: np.ndarray, framework: str) -> Any:
    from rumi_xarray.native.reads import adopt

    return adopt(array, framework)


def _batch(source: ChipSource, starts: Any, size: int, bands: Any, boundless: bool,
           band_index: Any = None) -> ChipBatch:
    positions = source.band_positions(bands, band_index)
    return batch_chips(source.cube, source.cube_starts(starts), size, positions,
                      boundless=boundless)


def _raw_fill(source: ChipSource, fill_value: Any, masked: bool) -> Any:
    """Return the stored value outside the raster (nodata when known, else 0)."""
    if fill_value is not None and not masked:
        return fill_value
    nodata = source.nodata
    if nodata is not None and not (isinstance(nodata, float) and np.isnan(nodata)
                                   and source.dtype.kind != "f"):
        return nodata
    return 0


def _execute(source: ChipSource, batch: ChipBatch, framework: str, *, fill_value: Any,
             out: np.ndarray | None = None) -> Any:
    """Run a chip batch and return ``(n, band, size, size)`` in ``framework``."""
    from rumi_xarray.native import reads

    cube = source.cube
    n, nb, s = batch.n, len(batch.bands), batch.size
    if batch.direct:
        call = batch.calls[0]
        if framework == "numpy":
            if out is None:
                out = np.empty((n, nb, s, s), dtype=cube.grid.dtype)
            reads.run(cube, call, out=out.reshape(n, 1, nb, s, s))  # a view: decoded in place
            return out
        return reads.run_as(cube, call, framework, pattern="n b y x")
    if out is None:
        out = np.empty((n, nb, s, s), dtype=cube.grid.dtype)
    out[...] = fill_value
    for index, call in enumerate(batch.calls):
        result = reads.run(cube, call)
        for p in batch.placements:
            if p.call == index:
                out[p.chip, :, p.oy:p.oy + p.h, p.ox:p.ox + p.w] = (
                    result[p.item, p.t, :, p.sy:p.sy + p.h, p.sx:p.sx + p.w])
    return reads.adopt(out, framework)


def _decode(source: ChipSource, raw: np.ndarray, fill_value: Any,
            mask_and_scale: bool | None) -> np.ndarray:
    """Decode raw chips as every door decodes (:mod:`rumi_xarray.conventions.decoding`)."""
    decoded = decoding.decode_samples(raw, source.cf, mask_and_scale, source.name)
    if fill_value is not None and decoded.dtype.kind == "f":
        decoded = np.where(np.isnan(decoded), decoded.dtype.type(fill_value), decoded)
    return decoded


# --- explain ---------------------------------------------------------------------


def explain_chips(cube: Any, starts: Any, size: int, *, bands: Any = None,
                  band_index: Any = None, boundless: bool = False) -> Explanation:
    """Say what :func:`read_chips` of these chips costs, with no I/O.

    Parameters
    ----------
    cube, starts, size, bands, band_index, boundless
        As for :func:`read_chips`.

    Returns
    -------
    Explanation
        Native calls, windows, frames, compressed bytes and byte ranges
        (librumi's own plan of each window), decoded bytes.

    Examples
    --------
    >>> cube = rx.open_catalog("catalog.parquet")
    >>> print(rx.explain_chips(cube, [(0, 0, 0), (1, 64, 64)], 64))
    1 native read call(s), 2 window(s), 8 frame(s): ...
    """
    from rumi_xarray.native.reads import explain_calls

    source = chip_source(cube)
    batch = _batch(source, starts, size, bands, boundless, band_index)
    return explain_calls((source.cube, call) for call in batch.calls)


# --- labelled chips ----------------------------------------------------------------


def pixel_centres(source: ChipSource, axis: str, starts: np.ndarray, size: int) -> np.ndarray:
    """Return ``(n, size)`` pixel-centre coordinates of chips along ``y`` or ``x``.

    Inside the raster they are the cube's own coordinate values (bit for
    bit); outside (boundless chips) they continue the transform.

    Parameters
    ----------
    source : ChipSource
    axis : {"y", "x"}
    starts : numpy.ndarray
        ``(n,)`` first row or column of each chip.
    size : int

    Returns
    -------
    numpy.ndarray
    """
    values = source.y if axis == "y" else source.x
    index = starts[:, None] + np.arange(size)[None, :]
    if values is None:
        return index.astype(np.float64)
    extent = len(values)
    out = values[np.clip(index, 0, extent - 1)].astype(np.float64)
    outside = (index < 0) | (index >= extent)
    if outside.any():
        step = (values[-1] - values[0]) / (extent - 1) if extent > 1 else (
            _step(source, axis))
        out[outside] = values[0] + index[outside] * step
    return out


def _step(source: ChipSource, axis: str) -> float:
    gt = source.transform
    if gt is None:
        return 1.0
    return gt[5] if axis == "y" else gt[1]


def bounds(source: ChipSource, starts: np.ndarray, size: int) -> np.ndarray:
    """Return ``(n, 4)`` ``(minx, miny, maxx, maxy)`` of chips, as rasterio orders them.

    Parameters
    ----------
    source : ChipSource
    starts : numpy.ndarray
        ``(n, 3)`` object ``(time, row, col)``.
    size : int

    Returns
    -------
    numpy.ndarray
        In the CRS's units; pixel units when the cube has no transform.
    """
    rows, cols = starts[:, 1].astype(np.float64), starts[:, 2].astype(np.float64)
    gt = source.transform
    if gt is None:
        return np.stack([cols, rows, cols + size, rows + size], axis=1)
    xs = np.stack([gt[0] + cols * gt[1] + rows * gt[2],
                   gt[0] + (cols + size) * gt[1] + (rows + size) * gt[2]], axis=1)
    ys = np.stack([gt[3] + cols * gt[4] + rows * gt[5],
                   gt[3] + (cols + size) * gt[4] + (rows + size) * gt[5]], axis=1)
    return np.stack([xs.min(1), ys.min(1), xs.max(1), ys.max(1)], axis=1)


def chips(cube: Any, starts: Any, size: int, *, bands: Any = None, band_index: Any = None,
          boundless: bool = False, fill_value: Any = None,
          mask_and_scale: bool | None = False) -> xr.DataArray:
    """Read chips as a labelled DataArray ``(chip, band, y, x)``.

    Each chip keeps its ``time`` (coordinate along ``chip``), its pixel
    centres as ``(chip, y)`` and ``(chip, x)`` coordinates, its upper-left
    ``row``/``col``, its bounds (``minx``, ``miny``, ``maxx``, ``maxy`` along
    ``chip``) and the CRS (``spatial_ref``).

    Parameters
    ----------
    cube, starts, size, bands, band_index, boundless, fill_value, mask_and_scale
        As for :func:`read_chips`.

    Returns
    -------
    xarray.DataArray
    """
    source = chip_source(cube)
    data = read_chips(source, starts, size, bands=bands, band_index=band_index,
                      boundless=boundless, fill_value=fill_value, mask_and_scale=mask_and_scale)
    object_starts = as_starts(starts)
    positions = source.band_positions(bands, band_index)
    coords: dict[Hashable, Any] = {
        "band": ("band", source.band_values(positions)),
        "time": ("chip", source.time_values[object_starts[:, 0]]),
        "row": ("chip", object_starts[:, 1]),
        "col": ("chip", object_starts[:, 2]),
        "y": (("chip", "y"), pixel_centres(source, "y", object_starts[:, 1], size)),
        "x": (("chip", "x"), pixel_centres(source, "x", object_starts[:, 2], size)),
    }
    box = bounds(source, object_starts, size)
    for k, corner in enumerate(BOUNDS):
        coords[corner] = ("chip", box[:, k])
    attrs: dict[str, Any] = {}
    if not decoding.applies_cf(mask_and_scale):
        attrs.update({k: v for k, v in source.cf.items()})
    if source.crs is not None:
        spatial: dict[str, Any] = {"crs_wkt": source.crs, "spatial_ref": source.crs}
        if source.transform is not None:
            spatial["GeoTransform"] = " ".join(repr(v) for v in source.transform)
        coords["spatial_ref"] = ((), np.int64(0), spatial)
        attrs["grid_mapping"] = "spatial_ref"
    return xr.DataArray(data, dims=("chip", "band", "y", "x"), coords=coords, attrs=attrs,
                        name=source.name if "," not in source.name else "chips")
