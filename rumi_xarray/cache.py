"""A bounded, thread-safe cache of decoded tiles for interactive (lazy) reads.

Like GDAL's block cache: exploring pixels and chips near each other decodes
each frame once. Entries are whole decoded tile planes, one per (scene, time
step, band, tile cell). The key holds the scene's header bytes (frame offsets,
sizes and checksums) and, for local files, the file's identity and
modification time, so a different or rewritten file can never be served
from the cache.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

#: Default budget: 5 % of physical memory, between 64 MiB and 2 GiB.
_MIN, _MAX = 64 * 2**20, 2 * 2**30


def default_bytes() -> int:
    """Return the default cache size, or ``RUMI_XARRAY_CACHE`` (bytes) when set."""
    env = os.environ.get("RUMI_XARRAY_CACHE")
    if env is not None:
        import dask.utils

        return int(dask.utils.parse_bytes(env))
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 * 2**30
    return int(min(_MAX, max(_MIN, total // 20)))


class TileCache:
    """LRU cache of decoded tile planes, bounded in bytes.

    Parameters
    ----------
    max_bytes : int
        Capacity; 0 disables caching.
    """

    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, np.ndarray] = OrderedDict()
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> np.ndarray | None:
        """Return the cached plane for ``key`` (marking it recently used) or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def peek(self, key: Any) -> np.ndarray | None:
        """Return the cached plane for ``key`` without counting or reordering."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Any, value: np.ndarray) -> None:
        """Store a plane (read-only), evicting least recently used planes."""
        if value.nbytes > self.max_bytes:
            return
        value = value.copy() if value.base is not None else value
        value.setflags(write=False)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._entries[key] = value
            self.nbytes += value.nbytes
            while self.nbytes > self.max_bytes and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self.nbytes -= evicted.nbytes

    def clear(self) -> None:
        """Drop every entry and zero the counters."""
        with self._lock:
            self._entries.clear()
            self.nbytes = 0
            self.hits = 0
            self.misses = 0

    def resize(self, max_bytes: int) -> None:
        """Change the capacity, evicting as needed."""
        with self._lock:
            self.max_bytes = int(max_bytes)
            while self.nbytes > self.max_bytes and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self.nbytes -= evicted.nbytes

    def info(self) -> dict[str, int]:
        """Return size, capacity, entries, hits and misses."""
        with self._lock:
            return {"bytes": self.nbytes, "max_bytes": self.max_bytes,
                    "entries": len(self._entries), "hits": self.hits, "misses": self.misses}


CACHE = TileCache(default_bytes())


def set_cache_size(max_bytes: int | str) -> None:
    """Set the decoded-tile cache capacity of this process (0 disables it).

    Parameters
    ----------
    max_bytes : int or str
        Bytes, or a dask-style size such as ``"1GiB"``.
    """
    import dask.utils

    CACHE.resize(int(dask.utils.parse_bytes(max_bytes)) if isinstance(max_bytes, str)
                 else int(max_bytes))


def clear_cache() -> None:
    """Drop every decoded tile this process holds and zero the hit counters."""
    CACHE.clear()


def cache_info() -> dict[str, int]:
    """Return the tile cache's size, capacity, entries, hits and misses."""
    return CACHE.info()


def identity(source: Any, header: bytes) -> tuple[Any, ...]:
    """Return a key part that changes whenever the file's content may have.

    Parameters
    ----------
    source : str, bytes or RangeSource
    header : bytes

    Returns
    -------
    tuple
        The header (which locates and checksums every frame) plus, for local
        files, device, inode, size and modification time.
    """
    if isinstance(source, str) and "://" not in source:
        st = os.stat(source)
        return ("file", source, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, header)
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    # bytes are immutable and hash by content (cached by Python), URLs by
    # text, range sources by their own equality: none can alias another file.
    return ("other", source, header)
