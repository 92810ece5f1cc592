"""The catalog an ingest writes: a folder of Parquet parts, appended as outputs finish.

The folder is a catalog table as :func:`rumi_xarray.open_catalog` reads one
(files starting with ``.`` or ``_`` are skipped, as Spark and pyarrow skip
them): each flush writes one new part atomically (a hidden temporary file
renamed into place), so an interrupted run leaves a usable catalog of what
it finished. An output made again (its source changed) supersedes its old
row: the parts holding old rows for the same paths are rewritten without
them, atomically, after the new part is in place. Temporary files are those of
:func:`rumi_xarray.write.atomic.atomic_path` (hidden, so never read as parts).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from typing import Any

import pandas as pd

from rumi_xarray.errors import RumiCatalogError
from rumi_xarray.write.atomic import atomic_path

#: The file name of each part: sortable by when it was written.
_PART = "part-{stamp}-{token}.parquet"


class CatalogFolder:
    """An ingest's catalog folder: read what is recorded, append rows as outputs finish.

    Parameters
    ----------
    path : str
        The folder (``<out>/catalog.parquet`` by default); made when missing.
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise RumiCatalogError(f"{self.path}: exists and is not a folder; an ingest "
                                   f"catalog is a folder of Parquet parts")

    def parts(self) -> list[str]:
        """Return the folder's part files, oldest first."""
        if not os.path.isdir(self.path):
            return []
        return sorted(os.path.join(self.path, n) for n in os.listdir(self.path)
                      if n.endswith(".parquet") and not n.startswith((".", "_")))

    def recorded(self) -> dict[str, str]:
        """Return output path -> the key recorded for it (the newest row wins)."""
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        keys: dict[str, str] = {}
        for part in self.parts():
            try:
                table = pq.read_table(part, columns=["path", "_ingest_key"])
            except Exception as exc:  # pyarrow's errors for a damaged part
                raise RumiCatalogError(f"{part}: cannot read this catalog part "
                                       f"({type(exc).__name__}: {exc}); remove it and run "
                                       f"the ingest again to redo its outputs") from exc
            for path, key in zip(table.column("path").to_pylist(),
                                 table.column("_ingest_key").to_pylist(), strict=True):
                keys[str(path)] = str(key)
        return keys

    def append(self, rows: Sequence[dict[str, Any]]) -> str | None:
        """Write ``rows`` as a new part; drop older rows of the same outputs.

        Parameters
        ----------
        rows : sequence of dict
            Catalog rows with the provenance columns.

        Returns
        -------
        str or None
            The part written (None for no rows).
        """
        if not rows:
            return None
        os.makedirs(self.path, exist_ok=True)
        stamp = pd.Timestamp.now("UTC").strftime("%Y%m%dT%H%M%S%f")
        target = os.path.join(self.path, _PART.format(stamp=stamp, token=secrets.token_hex(4)))
        frame = pd.DataFrame(list(rows))
        _write(frame, target)
        self._drop_older({str(r["path"]) for r in rows}, keep=target)
        return target

    def _drop_older(self, paths: set[str], keep: str) -> None:
        import pyarrow.parquet as pq

        for part in self.parts():
            if part == keep:
                continue
            names = pq.read_table(part, columns=["path"]).column("path").to_pylist()
            if not paths.intersection(str(n) for n in names):
                continue
            frame = pd.read_parquet(part)
            kept = frame[~frame["path"].astype(str).isin(paths)]
            if kept.empty:
                os.remove(part)
            else:
                _write(kept.reset_index(drop=True), part)

    def frame(self) -> pd.DataFrame:
        """Return every row of the catalog (for the STAC table and reports)."""
        parts = self.parts()
        if not parts:
            return pd.DataFrame()
        return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def _write(frame: pd.DataFrame, target: str) -> None:
    """Write a Parquet part atomically (the one atomic-write rule of ``write/atomic``)."""
    with atomic_path(target) as temporary:
        frame.to_parquet(temporary, index=False)
