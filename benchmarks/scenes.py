"""The benchmark cube split into one Rumi file per date, for the catalog reader.

``rx.open_catalog`` stacks single-date scenes along time; to compare it with
one read of the whole cube, the scenes hold exactly the cube's samples, with
the cube's codec, tile size and frame layout. They are written from
``cube.rumi`` into ``<data>/scenes`` and reused while ``scenes.json`` there
matches the cube's manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import rumi

PATTERN = "t b y x"


def _write_array() -> Any:
    """Return rumi_xarray's array writer (its module moved between versions)."""
    try:
        from rumi_xarray.write.to_rumi import write_array
    except ImportError:  # the layout before the restructuring (commit b938ca8)
        from rumi_xarray.writer import write_array  # type: ignore[no-redef]
    return write_array


def prepare(stores: Any, log: Any = print) -> list[Path]:
    """Write (or reuse) one Rumi file per date of ``stores.rumi``.

    Parameters
    ----------
    stores : datagen.Stores
    log : callable

    Returns
    -------
    list of Path
        One file per date, in time order.
    """
    folder = stores.root / "scenes"
    manifest = folder / "scenes.json"
    key = {"header": stores.header.hex(), "codec": stores.codec}
    names = [f"s{i:03d}.rumi" for i in range(len(stores.dates))]
    paths = [folder / n for n in names]
    if manifest.exists() and json.loads(manifest.read_text()) == key and all(
            p.exists() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    manifest.unlink(missing_ok=True)
    meta = rumi.info(source=str(stores.rumi), header=stores.header)
    write_array = _write_array()
    for i, (path, date) in enumerate(zip(paths, stores.dates, strict=True)):
        data = rumi.read(str(stores.rumi), stores.header, time=(i, i + 1), pattern=PATTERN)
        write_array(path, np.ascontiguousarray(data), bands=list(meta.bands), time=[date],
                    transform=tuple(meta.transform), crs=meta.crs,
                    tile_size=int(meta.tile[0]), codec=stores.codec, frame="plane")
    manifest.write_text(json.dumps(key))
    log(f"wrote {len(paths)} single-date scenes in {folder}")
    return paths
