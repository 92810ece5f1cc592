"""Write a Rumi file from compressed frames (``rumi.write``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import rumi


def write_file(path: str, table: Any, payloads: list[bytes], *, bands: Sequence[str],
               time: Sequence[Any], transform: Sequence[float] | None, crs: int | None,
               pixel_is_point: bool) -> bytes:
    """Write a Rumi file whose frames are already compressed.

    Parameters
    ----------
    path : str
        Local destination (normally a temporary path, see
        :func:`rumi_xarray.write.atomic.atomic_path`).
    table : rumi.FrameTable
        Frame geometry (see :func:`rumi_xarray.native.frames.frame_specs`).
    payloads : list of bytes
        One compressed payload per frame, in table order.
    bands, time, transform, crs, pixel_is_point
        The labels the file stores.

    Returns
    -------
    bytes
        The external header.
    """
    table["compressed"] = payloads
    _, header = rumi.write(path, table, bands=list(bands), time=list(time),
                           transform=None if transform is None else tuple(transform),
                           crs=crs, pixel_is_point=pixel_is_point)
    return bytes(header)
