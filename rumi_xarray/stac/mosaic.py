"""Produce one output chunk of a STAC load: read, reproject, mosaic.

The reads are the block plan's native calls (one ``read_many`` per source
group, through :mod:`rumi_xarray.native.reads`); resampling is odc-geo's
``rio_reproject`` (GDAL's warper through rasterio), never our own; where the
source grid is the output grid shifted by whole pixels the window is pasted
as it is, as odc-stac does. Mosaicking keeps the first valid pixel: a unit
fills only output pixels still empty (equal to the fill value, or NaN), and
its own nodata pixels never count as valid.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rumi_xarray.native import reads
from rumi_xarray.stac.plan import BlockPlan, Contribution


def load_block(block: BlockPlan) -> np.ndarray:
    """Return the ``(time, band, y, x)`` pixels of one output chunk.

    Parameters
    ----------
    block : BlockPlan
        From :func:`rumi_xarray.stac.plan.block_plan`.

    Returns
    -------
    numpy.ndarray
    """
    out = np.full(block.shape, block.fill, dtype=block.dtype)
    if not any(block.layers):
        return out
    results = [reads.run(r.cube, r.call) for r in block.reads]
    for t, layer in enumerate(block.layers):
        for part in layer:
            src = results[part.read][part.item, part.step, :, part.rows, part.cols]
            target = out[t][(slice(None), *part.roi_dst)]
            _fuse(target, _pixels(part, src, target.shape, block), block.fill)
    return out


def _pixels(part: Contribution, src: np.ndarray, shape: tuple[int, ...], block: BlockPlan
            ) -> np.ndarray:
    """Return a unit's pixels on the block's grid, its nodata set to the fill value."""
    if part.paste:
        pix = src.astype(block.dtype, copy=True)
        if part.nodata is not None and not _same_nodata(part.nodata, block.fill):
            pix[_missing(src, part.nodata)] = block.fill
        return pix
    from odc.geo.warp import rio_reproject

    _quiet_rasterio()
    pix = np.full(shape, block.fill, dtype=block.dtype)
    dst_gbox = block.geobox[part.roi_dst]
    # XSCALE/YSCALE None: odc-geo would force them to 1 (a workaround for rotated grids),
    # which keeps GDAL's kernels one output pixel wide on a coarser grid and so samples
    # only some of the source pixels under each output pixel. odc.stac.load and gdalwarp
    # let GDAL widen them by the shrink factor; None reaches odc-geo's own filter of
    # unset options, so GDAL does the same here (plan.source_padding widens the window).
    rio_reproject(np.ascontiguousarray(src), pix, part.src_gbox, dst_gbox, block.resampling,
                  src_nodata=part.nodata, dst_nodata=block.fill, XSCALE=None, YSCALE=None)
    return pix


def _quiet_rasterio() -> None:
    """Silence rasterio's NotGeoreferencedWarning about its temporary in-memory datasets.

    ``rasterio.warp.reproject`` wraps numpy arrays in in-memory datasets and
    warns that they have no geotransform before applying the transforms we
    pass; the warning says nothing about the data. Only that category, from
    ``rasterio.warp`` only, is ignored: a filter (``catch_warnings`` is not
    thread-safe and blocks run on dask's threads), put back if something
    (a test runner) reset the filters.
    """
    import warnings

    from rasterio.errors import NotGeoreferencedWarning  # type: ignore[import-untyped]

    module = r"rasterio\.warp"
    if not any(f[0] == "ignore" and f[2] is NotGeoreferencedWarning
               and getattr(f[3], "pattern", None) == module for f in warnings.filters):
        warnings.filterwarnings("ignore", category=NotGeoreferencedWarning, module=module)


def _fuse(dst: np.ndarray, src: np.ndarray, fill: Any) -> None:
    """Copy ``src`` into the pixels of ``dst`` that are still empty."""
    np.copyto(dst, src, where=_missing(dst, fill))


def _missing(pixels: np.ndarray, nodata: Any) -> np.ndarray:
    if pixels.dtype.kind == "f":
        if nodata is None or math.isnan(float(nodata)):
            return np.isnan(pixels)
        return np.isnan(pixels) | (pixels == nodata)
    if nodata is None:
        return np.zeros(pixels.shape, dtype=bool)
    return pixels == nodata


def _same_nodata(a: float | None, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(float(a)):
        return math.isnan(float(b))
    return float(a) == float(b)
