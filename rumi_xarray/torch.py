"""PyTorch datasets and samplers of chips: one ``read_many`` per batch.

The one module importing torch (the ``torch`` extra). :class:`ChipDataset` is
a map-style dataset whose keys are chip starts ``(time, row, col)`` (or
``(grid, time, row, col)`` over several grids); ``DataLoader`` (torch >= 2.0)
calls its ``__getitems__`` with a whole batch of keys, which reads the batch
in one native call per grid and date and hands librumi's allocation to torch
through DLPack. :func:`collate` keeps that tensor as the batch (no copy,
no ``torch.stack``). The dataset pickles paths and headers only, so
``num_workers > 0`` workers read independently of each other; samplers run
in the main process, so a seeded sampler gives the same batches with any
``num_workers``.

Scenes on several grids (UTM zones, catalogs of unlike tiles) are given as a
sequence of cubes, one per grid: a chip lives in one scene's pixel grid and
nothing is reprojected, as torchgeo's datasets do per CRS. Chips on a common
grid come from ``rx.open_stac(items, crs=..., resolution=...)`` instead (the
reprojecting STAC path), which is a cube like any other here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from rumi_xarray.backend.chips import ChipSource, bounds, chip_source, explain_chips, read_chips
from rumi_xarray.conventions import decoding
from rumi_xarray.errors import RumiSelectionError, argument_error
from rumi_xarray.model.chips import grid_starts, random_starts
from rumi_xarray.model.costs import Explanation

__all__ = ["ChipDataset", "GridChipSampler", "RandomChipSampler", "collate"]

Sample = dict[str, Any]

#: numpy sample types -> torch's (every type Rumi stores that torch represents).
_TORCH_TYPES = {"uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
                "uint16": torch.uint16, "int32": torch.int32, "uint32": torch.uint32,
                "int64": torch.int64, "uint64": torch.uint64, "float16": torch.float16,
                "float32": torch.float32, "float64": torch.float64}


def _positive(what: str, value: Any) -> int:
    """Return ``value`` as an int when it is a positive integer (not a bool), else raise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise RumiSelectionError(f"chip {what} must be a positive integer, got {value!r}")
    return int(value)


def _check_fits(sources: list[ChipSource], size: int) -> None:
    """Raise when a chip of ``size`` does not fit in some grid's raster."""
    for source in sources:
        _, _, height, width = source.shape
        if size > height or size > width:
            raise RumiSelectionError(
                f"{source.cube.name}: a {size}x{size} chip does not fit in the "
                f"{height}x{width} raster")


def _grid_differences(image: ChipSource, mask: ChipSource) -> list[str]:
    """Return how the mask's grid differs from the image's (shape, transform, CRS)."""
    out = []
    _, _, h, w = image.shape
    _, _, mh, mw = mask.shape
    if (h, w) != (mh, mw):
        out.append(f"y/x shape {mh}x{mw} != {h}x{w}")
    if image.transform is not None and mask.transform is not None:
        if not np.allclose(image.transform, mask.transform, rtol=1e-12, atol=1e-9):
            out.append(f"transform {mask.transform} != {image.transform}")
    elif (image.transform is None) != (mask.transform is None):
        out.append("one has a transform, the other none")
    elif not out and not all(
            a is not None and b is not None and np.array_equal(a, b)
            for a, b in ((image.x, mask.x), (image.y, mask.y))):
        out.append("x/y coordinates differ")
    if not _same_crs(image.crs, mask.crs):
        out.append(f"CRS {_crs_name(mask.crs)} != {_crs_name(image.crs)}")
    return out


def _same_crs(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    if a == b:
        return True
    from pyproj import CRS

    try:
        return bool(CRS.from_user_input(a) == CRS.from_user_input(b))
    except Exception:  # an unparsable WKT: the texts decide
        return False


def _crs_name(crs: str | None) -> str:
    if crs is None:
        return "none"
    from pyproj import CRS

    try:
        parsed = CRS.from_user_input(crs)
    except Exception:
        return crs[:60]
    authority = parsed.to_authority()
    return ":".join(authority) if authority else parsed.name


def _sources(cube: Any) -> tuple[list[ChipSource], bool]:
    """Return the chip sources of one cube or of a sequence of cubes (one per grid)."""
    if isinstance(cube, (list, tuple)):
        if not cube:
            raise RumiSelectionError("no cube to take chips from")
        return [chip_source(c) for c in cube], True
    return [chip_source(cube)], False


class ChipDataset(Dataset[Sample]):
    """Chips of a cube (or of one cube per grid) as a map-style torch dataset.

    Parameters
    ----------
    cube : Dataset, DataArray, ChipSource or sequence of them
        A cube opened by rumi_xarray (one file, ``open_mfdataset``, a
        catalog, STAC); a sequence for scenes on several grids.
    size : int
        Chip height and width in pixels.
    bands : hashable or sequence, optional
        Band labels, as ``.sel(band=...)`` takes them (short names, or 1..n
        for unnamed bands); default every band.
    transform : callable, optional
        Applied to every sample dict (as torchgeo's ``transforms``).
    mask : Dataset or DataArray, optional
        A raster on the same grid (one time step, e.g. land cover) read at
        each chip's window into ``sample["mask"]`` (``(size, size)``), one
        more native call per batch. Only with a single cube. Its y/x shape,
        transform and CRS must equal the image's (else
        :class:`~rumi_xarray.errors.RumiArgumentError`, ``keyword="mask"``).
    mask_band : str or int, optional
        The mask's band label (a name, or 1..n for unnamed bands); needed
        when the mask has more than one band.
    boundless : bool, default False
        Chips may cross the raster's edge (filled with nodata).
    mask_and_scale : bool or None, default True
        As on every door (``docs/guide/nodata-cf.md``). True (the default):
        rioxarray's masked floats, the float32 tensors torch's operations and
        torchgeo expect (float64 for samples wider than 16 bits), nodata as
        NaN, scale and offset applied. None: xarray's CF decoding (integers
        with nothing to mask stay integers). False: the stored samples.
        The mask (``mask=``) is always read as stored (class labels).
    band_index : int or sequence of int, optional
        0-based band positions instead of ``bands=`` labels.

    Notes
    -----
    Keys are ``(time, row, col)`` tuples (``(grid, time, row, col)`` with a
    sequence of cubes), as the samplers yield them. A sample is a dict with
    ``image`` (``(band, size, size)``), ``time`` (nanoseconds since the epoch),
    ``bounds`` (``minx, miny, maxx, maxy``), ``crs`` (WKT) and ``key``.

    Examples
    --------
    >>> from rumi_xarray.torch import ChipDataset
    >>> cube = rx.open_catalog("catalog.parquet")
    >>> chips = ChipDataset(cube, 64, bands=["B04", "B08"])
    >>> sample = chips[(0, 0, 64)]
    >>> tuple(sample["image"].shape), sample["bounds"].tolist()
    ((2, 64, 64), [400600.0, 5899400.0, 401240.0, 5900040.0])
    """

    def __init__(self, cube: Any, size: int, bands: Any = None,
                 transform: Callable[[Sample], Sample] | None = None, *,
                 mask: Any = None, mask_band: str | int | None = None,
                 boundless: bool = False, mask_and_scale: bool | None = True,
                 band_index: Any = None) -> None:
        self.sources, self.many = _sources(cube)
        self.size = _positive("size", size)
        if not boundless:
            _check_fits(self.sources, self.size)
        self.bands = bands
        self.band_index = band_index
        self.transform = transform
        self.boundless = boundless
        self.mask_and_scale = mask_and_scale
        if mask is not None and self.many:
            raise RumiSelectionError("mask= goes with a single cube (one grid)")
        self.mask = None if mask is None else chip_source(mask)
        self.mask_band: str | int | None = None
        if self.mask is not None:
            self.mask_band = self._mask_band(self.mask, mask_band)
        elif mask_band is not None:
            raise argument_error("mask_band= goes with mask=", "mask_band")
        for source in self.sources:
            source.band_positions(bands, band_index)  # a bad selection fails here, not in a worker

    def _mask_band(self, mask: ChipSource, band: str | int | None) -> str | int | None:
        """Check the mask lies on the image's grid and return its band selection to read."""
        image = self.sources[0]
        differences = _grid_differences(image, mask)
        if differences:
            raise argument_error(
                f"mask {mask.cube.name} is not on the grid of the image {image.cube.name}: "
                f"{'; '.join(differences)}; the mask must be a raster on the same grid "
                f"(reproject it first, e.g. with rioxarray's reproject_match)",
                "mask", mask.cube.name)
        if band is None:
            if len(mask.bands) != 1:
                raise argument_error(
                    f"mask {mask.cube.name} has {len(mask.bands)} bands "
                    f"{list(mask.band_names)}; select one with mask_band= (a name or "
                    f"position)", "mask_band", mask.cube.name)
            return None
        if isinstance(band, bool) or not isinstance(band, (str, int, np.integer)):
            raise argument_error(f"mask_band={band!r} must be one band label (a name, or "
                                 f"1..n for unnamed bands)", "mask_band")
        mask.band_positions(band)  # an unknown band fails here
        return band

    def __len__(self) -> int:
        """Return the number of chips a stride-``size`` grid sampler yields (for ``len``)."""
        total = 0
        for source in self.sources:
            t, _, h, w = source.shape
            total += t * (-(-h // self.size)) * (-(-w // self.size))
        return total

    def __getitem__(self, key: Sequence[int]) -> Sample:
        """Read one chip (one native call); prefer batches (``__getitems__``)."""
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[Sequence[int]]) -> list[Sample]:
        """Read a batch of chips: one ``read_many`` per grid and date.

        Parameters
        ----------
        keys : sequence of tuple
            Chip starts as the samplers yield them.

        Returns
        -------
        list of dict
            One sample per key, in order; their ``image`` tensors are views
            of one batch tensor, which :func:`collate` returns without a copy.
        """
        by_grid = self._split(keys)
        samples: list[Sample | None] = [None] * len(keys)
        for g, (positions, starts) in by_grid.items():
            source = self.sources[g]
            images = self._read(source, starts, self.bands, self.mask_and_scale, self.band_index)
            masks = None
            if self.mask is not None:
                mask_starts = starts.copy()
                mask_starts[:, 0] = 0
                masks = self._read(self.mask, mask_starts, self.mask_band, False)
            times = _nanoseconds(source.time_values[starts[:, 0]])
            boxes = bounds(source, starts, self.size)
            for k, pos in enumerate(positions):
                sample: Sample = {"image": images[k], "time": int(times[k]),
                                  "bounds": boxes[k], "crs": source.crs,
                                  "key": tuple(int(v) for v in keys[pos])}
                if masks is not None:
                    sample["mask"] = masks[k, 0]
                samples[pos] = sample
        out = [s for s in samples if s is not None]
        if self.transform is not None:
            out = [self.transform(s) for s in out]
        return out

    def _read(self, source: ChipSource, starts: np.ndarray, bands: Any,
              mask_and_scale: bool | None, band_index: Any = None) -> torch.Tensor:
        """Read one batch of one grid as a tensor, without a copy.

        In the main process the tensor is librumi's allocation (DLPack). In a
        ``DataLoader`` worker librumi decodes straight into a shared-memory
        tensor, which torch hands to the main process without the copy into
        shared memory it makes of any other tensor.
        """
        from torch.utils.data import get_worker_info

        if get_worker_info() is None:
            return read_chips(source, starts, self.size, bands=bands, band_index=band_index,
                              framework="torch", boundless=self.boundless,
                              mask_and_scale=mask_and_scale)
        shape = (len(starts), len(source.band_positions(bands, band_index)), self.size,
                 self.size)
        dtype = decoding.decoded_dtype(source.dtype, source.cf, mask_and_scale)
        tensor = torch.empty(shape, dtype=_TORCH_TYPES[dtype.name]).share_memory_()
        if not decoding.changes_samples(source.dtype, source.cf, mask_and_scale):
            read_chips(source, starts, self.size, bands=bands, band_index=band_index,
                       boundless=self.boundless, out=tensor.numpy())
        else:  # decoded floats are a new array: written once, into shared memory
            tensor.numpy()[...] = read_chips(source, starts, self.size, bands=bands,
                                             band_index=band_index, boundless=self.boundless,
                                             mask_and_scale=mask_and_scale)
        return tensor

    def explain(self, keys: Sequence[Sequence[int]]) -> Explanation:
        """Say what reading a batch costs (native calls, frames, bytes), with no I/O.

        Parameters
        ----------
        keys : sequence of tuple

        Returns
        -------
        Explanation
        """
        parts = [explain_chips(self.sources[g], starts, self.size, bands=self.bands,
                               band_index=self.band_index, boundless=self.boundless)
                 for g, (_, starts) in self._split(keys).items()]
        if self.mask is not None:
            starts = np.asarray([k[-3:] for k in keys], dtype=np.int64)
            starts[:, 0] = 0
            parts.append(explain_chips(self.mask, starts, self.size, bands=self.mask_band,
                                       boundless=self.boundless))
        return Explanation.total(parts)

    def _split(self, keys: Sequence[Sequence[int]]) -> dict[int, tuple[list[int], np.ndarray]]:
        array = np.asarray(keys, dtype=np.int64)
        width = 4 if self.many else 3
        if array.ndim != 2 or array.shape[1] != width:
            raise RumiSelectionError(
                f"chip keys are {'(grid, time, row, col)' if self.many else '(time, row, col)'}"
                f" tuples, got shape {array.shape}")
        if not self.many:
            return {0: (list(range(len(array))), array)}
        out: dict[int, tuple[list[int], np.ndarray]] = {}
        for g in np.unique(array[:, 0]).tolist():
            if not 0 <= g < len(self.sources):
                raise RumiSelectionError(f"chip key names grid {g}; there are "
                                         f"{len(self.sources)}")
            where = np.flatnonzero(array[:, 0] == g)
            out[int(g)] = (where.tolist(), array[where, 1:])
        return out


def _nanoseconds(values: np.ndarray) -> np.ndarray:
    if np.issubdtype(values.dtype, np.datetime64):
        return values.astype("datetime64[ns]").astype(np.int64)
    return values.astype(np.int64)


def collate(samples: Sequence[Sample]) -> Sample:
    """Collate samples into a batch, keeping the batch tensor zero-copy.

    When the samples' images are consecutive views of one tensor (as
    ``ChipDataset.__getitems__`` returns them) that tensor is the
    batch's ``image``; otherwise (samples from several grids, transformed
    samples) they are stacked. ``time`` becomes an int64 tensor, ``bounds``
    a float64 ``(n, 4)`` tensor, ``crs`` and ``key`` lists.

    Parameters
    ----------
    samples : sequence of dict

    Returns
    -------
    dict

    Examples
    --------
    >>> from torch.utils.data import DataLoader
    >>> from rumi_xarray.torch import ChipDataset, GridChipSampler, collate
    >>> cube = rx.open_catalog("catalog.parquet")
    >>> chips = ChipDataset(cube, 64, bands=["B04", "B08"])
    >>> loader = DataLoader(chips, batch_size=4, sampler=GridChipSampler(cube, 64, 64, time=[0]),
    ...                     collate_fn=collate)
    >>> tuple(next(iter(loader))["image"].shape)
    (4, 2, 64, 64)
    """
    batch: Sample = {}
    for name in samples[0]:
        values = [s[name] for s in samples]
        if isinstance(values[0], torch.Tensor):
            batch[name] = _whole(values)
        elif name == "time":
            batch[name] = torch.tensor(values, dtype=torch.int64)
        elif name == "bounds":
            batch[name] = torch.from_numpy(np.stack(values).astype(np.float64))
        else:
            batch[name] = values
    return batch


def _whole(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Return the tensor the views were taken from when they are all of it, in order."""
    base = tensors[0]._base
    if (base is not None and base.shape[0] == len(tensors)
            and all(t._base is base for t in tensors)
            and all(t.data_ptr() == base[i].data_ptr() for i, t in enumerate(tensors))
            and tuple(tensors[0].shape) == tuple(base.shape[1:])):
        return base
    return torch.stack(tensors)


class RandomChipSampler(Sampler[tuple[int, ...]]):
    """Random chip starts inside the raster(s), dates drawn uniformly or by weight.

    Parameters
    ----------
    cube : Dataset, DataArray, ChipSource or sequence of them
        As for :class:`ChipDataset` (a sequence: grids drawn in proportion to
        their chip positions x dates).
    size : int
    length : int
        Chips per epoch.
    seed : int, optional
        Epoch ``e`` of a sampler with seed ``s`` draws from
        ``numpy.random.default_rng([s, e])``: the same batches in every run
        and with any ``num_workers`` (samplers run in the main process).
    time : sequence of int, optional
        Time positions to draw from; default every one.
    weights : sequence of float, optional
        Relative weight of each of those dates (e.g. favour clear ones).

    Examples
    --------
    >>> from rumi_xarray.torch import RandomChipSampler
    >>> cube = rx.open_catalog("catalog.parquet")
    >>> sampler = RandomChipSampler(cube, 64, 10, seed=0)
    >>> len(sampler), list(sampler) == list(RandomChipSampler(cube, 64, 10, seed=0))
    (10, True)
    """

    def __init__(self, cube: Any, size: int, length: int, seed: int | None = None,
                 time: Sequence[int] | None = None,
                 weights: Sequence[float] | None = None) -> None:
        self.sources, self.many = _sources(cube)
        self.size, self.seed = _positive("size", size), seed
        self.length = _positive("sampler length", length)
        _check_fits(self.sources, self.size)
        self.times = [np.asarray(time if time is not None else range(s.shape[0]),
                                 dtype=np.int64) for s in self.sources]
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.epoch = 0
        for source, times in zip(self.sources, self.times, strict=True):
            n = source.shape[0]
            if times.size == 0 or (times < 0).any() or (times >= n).any():
                raise RumiSelectionError(f"{source.cube.name}: time positions must lie in "
                                         f"[0, {n})")

    def __len__(self) -> int:
        """Return the chips per epoch."""
        return self.length

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        """Yield chip keys for one epoch."""
        rng = np.random.default_rng(None if self.seed is None else [self.seed, self.epoch])
        self.epoch += 1
        counts = [self.length]
        order = np.arange(self.length)
        if self.many:
            room = np.asarray([len(t) * (s.shape[2] - self.size + 1)
                               * (s.shape[3] - self.size + 1)
                               for s, t in zip(self.sources, self.times, strict=True)],
                              dtype=np.float64)
            grid = rng.choice(len(self.sources), size=self.length, p=room / room.sum())
            counts = np.bincount(grid, minlength=len(self.sources)).tolist()
            order = np.argsort(np.argsort(grid, kind="stable"), kind="stable")
        drawn: list[tuple[int, ...]] = []
        for g, (source, times) in enumerate(zip(self.sources, self.times, strict=True)):
            _, _, h, w = source.shape
            starts = random_starts(rng, counts[g], self.size, times, self.weights, h, w)
            drawn.extend((g, *map(int, s)) if self.many else tuple(map(int, s))
                         for s in starts)
        if self.many:
            drawn = [drawn[i] for i in order]
        yield from drawn


class GridChipSampler(Sampler[tuple[int, ...]]):
    """Chips tiling the raster(s) with a stride, every date, in order.

    The last row and column of chips end at the raster's edge, so every pixel
    is covered and no chip crosses the edge.

    Parameters
    ----------
    cube : Dataset, DataArray, ChipSource or sequence of them
    size : int
    stride : int
        Pixels between chip starts (``size`` for no overlap).
    time : sequence of int, optional
        Time positions; default every one.

    Examples
    --------
    >>> from rumi_xarray.torch import GridChipSampler
    >>> cube = rx.open_catalog("catalog.parquet")
    >>> keys = list(GridChipSampler(cube, 64, 64, time=[0]))
    >>> keys
    [(0, 0, 0), (0, 0, 64), (0, 64, 0), (0, 64, 64)]
    """

    def __init__(self, cube: Any, size: int, stride: int,
                 time: Sequence[int] | None = None) -> None:
        self.sources, self.many = _sources(cube)
        size, stride = _positive("size", size), _positive("stride", stride)
        _check_fits(self.sources, size)
        self.keys: list[tuple[int, ...]] = []
        for g, source in enumerate(self.sources):
            t, _, h, w = source.shape
            times = np.asarray(time if time is not None else range(t), dtype=np.int64)
            for s in grid_starts(times, size, stride, h, w):
                self.keys.append((g, *map(int, s)) if self.many else tuple(map(int, s)))

    def __len__(self) -> int:
        """Return the number of chips."""
        return len(self.keys)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        """Yield every chip key."""
        yield from self.keys
