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

from rumi_xarray import options
from rumi_xarray.errors import with_context
from rumi_xarray.model.cube import Scene

#: Default budget: 5 % of physical memory, between 64 MiB and 2 GiB, and in a
#: dask worker at most 10 % of the worker's memory limit.
_MIN, _MAX = 64 * 2**20, 2 * 2**30
_WORKER_FRACTION = 0.10


def default_bytes() -> int:
    """Return the cache size to use: the ``cache_bytes`` option, else the default.

    Returns
    -------
    int
    """
    chosen = options.option("cache_bytes")
    if chosen is not None:
        return int(chosen)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 * 2**30
    size = int(min(_MAX, max(_MIN, total // 20)))
    from rumi_xarray.dask.cluster import worker_memory_limit

    limit = worker_memory_limit()
    if limit:
        # Workers kill themselves above their limit: a cache sized on the host
        # would count against it unseen.
        size = min(size, int(limit * _WORKER_FRACTION))
    return size


class TileCache:
    """LRU cache of decoded tile planes, bounded in bytes.

    Parameters
    ----------
    max_bytes : int
        Capacity; 0 disables caching.
    """

    #: Keys of planes asked for but not cached, remembered to spot reuse.
    GHOSTS = 65536

    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, np.ndarray] = OrderedDict()
        self._ghosts: OrderedDict[Any, None] = OrderedDict()
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

    def seen(self, keys: list[Any]) -> bool:
        """Return whether any of these uncached plane keys was asked for recently."""
        with self._lock:
            return any(key in self._ghosts for key in keys)

    def remember(self, keys: list[Any]) -> None:
        """Note plane keys that were read without caching (reuse would show later)."""
        with self._lock:
            for key in keys:
                self._ghosts[key] = None
                self._ghosts.move_to_end(key)
            while len(self._ghosts) > self.GHOSTS:
                self._ghosts.popitem(last=False)

    def put(self, key: Any, value: np.ndarray) -> None:
        """Store a plane (read-only), evicting least recently used planes."""
        if value.nbytes > self.max_bytes:
            return
        value = value.copy() if value.base is not None else value
        value.setflags(write=False)
        with self._lock:
            self._ghosts.pop(key, None)
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
            self._ghosts.clear()
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


_cache: TileCache | None = None
_cache_lock = threading.Lock()


def get_cache() -> TileCache:
    """Return this process's tile cache, sized at first use.

    Returns
    -------
    TileCache
    """
    global _cache
    if _cache is None:
        with _cache_lock:
            if _cache is None:
                _cache = TileCache(default_bytes())
    return _cache


def _resize(value: int | None) -> None:
    if _cache is not None:
        _cache.resize(default_bytes() if value is None else int(value))


options.on_change("cache_bytes", lambda value: _resize(value))


def clear_cache() -> None:
    """Drop every decoded tile this process holds and zero the hit counters."""
    get_cache().clear()


def cache_info() -> dict[str, int]:
    """Return the tile cache's size, capacity, entries, hits and misses.

    Returns
    -------
    dict
        ``bytes``, ``max_bytes``, ``entries``, ``hits``, ``misses``.
    """
    return get_cache().info()


def identity(scene: Scene) -> tuple[Any, ...]:
    """Return a key part that changes whenever the scene's content may have.

    Parameters
    ----------
    scene : Scene

    Returns
    -------
    tuple
        The header (which locates and checksums every frame) plus, for local
        files, device, inode, size and modification time.

    Raises
    ------
    RumiFileNotFoundError
        A local file is gone.
    """
    source, header = scene.source, scene.header
    if isinstance(source, str) and "://" not in source:
        try:
            st = os.stat(source)
        except OSError as exc:
            raise with_context(exc, f"{scene.describe()}: cannot read the file",
                               source=scene.name, row=scene.catalog_row) from exc
        return ("file", source, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, header)
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    # bytes are immutable and hash by content (cached by Python), URLs by
    # text, range sources by their own equality: none can alias another file.
    return ("other", source, header)
