"""An fsspec filesystem that records every byte range read, to count Parquet row groups read.

``counted:///abs/path`` is the local file at ``/abs/path``: a real
``LocalFileSystem`` whose open files log ``(path, start, stop)`` of each
``read``. Tests register it (in the client and, with ``client.run``, in dask
workers) and map the ranges onto the row groups of the Parquet footers.
"""

from __future__ import annotations

import threading
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileOpener, LocalFileSystem

PROTOCOL = "counted"
READS: list[tuple[str, int, int]] = []
_lock = threading.Lock()


class _CountingFile(LocalFileOpener):
    def read(self, length: int = -1) -> bytes:
        start = self.tell()
        data = super().read(length)
        with _lock:
            READS.append((self.path, start, start + len(data)))
        return data

    def readinto(self, buffer: Any) -> int:
        start = self.tell()
        n = super().readinto(buffer)
        with _lock:
            READS.append((self.path, start, start + int(n or 0)))
        return n


class CountingFileSystem(LocalFileSystem):
    """Local files, every read recorded in :data:`READS`."""

    protocol = (PROTOCOL,)
    root_marker = "/"

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        if text.startswith(f"{PROTOCOL}://"):
            text = text[len(PROTOCOL) + 3:]
        return super()._strip_protocol(text)

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        if "r" in mode:
            return _CountingFile(path, mode, fs=self, **kwargs)
        return super()._open(path, mode, block_size=block_size, **kwargs)


def register() -> None:
    """Make ``counted://`` URLs open through :class:`CountingFileSystem` in this process."""
    fsspec.register_implementation(PROTOCOL, CountingFileSystem, clobber=True)


def reset() -> list[tuple[str, int, int]]:
    """Return the reads recorded so far and forget them."""
    with _lock:
        out = list(READS)
        READS.clear()
    return out


def row_groups_read(path: str, reads: list[tuple[str, int, int]]) -> set[int]:
    """Return the row groups of a Parquet file whose column data a list of reads touched."""
    return column_groups_read(path, None, reads)


def column_groups_read(path: str, column: str | None, reads: list[tuple[str, int, int]]
                       ) -> set[int]:
    """Return the row groups whose chunk of ``column`` (None: any) a list of reads touched."""
    import os

    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    size = os.path.getsize(path)
    # A read ending at the end of the file is the footer's (pyarrow fetches its tail
    # speculatively, which may reach into the last row group's data): not a row group read.
    reads = [r for r in reads if r[2] < size]
    touched = set()
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for j in range(rg.num_columns):
            c = rg.column(j)
            if column is not None and c.path_in_schema.split(".", 1)[0] != column:
                continue
            lo = c.dictionary_page_offset or c.data_page_offset
            hi = lo + c.total_compressed_size
            if any(p == path and s < hi and e > lo for p, s, e in reads):
                touched.add(g)
    return touched
