"""A bounded, thread-safe cache of decoded tiles for interactive (lazy) reads.

Like GDAL's block cache: exploring pixels and chips near each other decodes
each frame once. Entries are whole decoded tile planes, one per (scene, time
step, band, tile cell), held in the blocks native calls decoded them into.
The key (:func:`rumi_xarray.backend.route.identity`) holds the scene's
header bytes (frame offsets, sizes and checksums) and, for local files, the
file's identity and modification time, so a different or rewritten file can
never be served from the cache. What goes into the cache, and when, is the
read route's policy (:mod:`rumi_xarray.backend.route`); this module only
stores.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from rumi_xarray import options

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
    """LRU cache of decoded tile planes, bounded in bytes, plus idle read buffers.

    Planes arrive in *blocks*: the buffer one native call decoded whole tile
    cells into becomes the cache entry as it is (no copy), and every plane
    of it is reachable by key as a read-only view. Eviction drops whole
    blocks, least recently used first, so the bytes counted are exactly the
    bytes held. Idle scratch buffers (what sparse reads decode into before
    gathering, kept so the next read does not fault fresh memory in) count
    against the same capacity and are evicted like blocks.

    Parameters
    ----------
    max_bytes : int
        Capacity; 0 disables caching.
    """

    #: Keys of planes asked for but not cached, remembered to spot reuse.
    GHOSTS = 65536
    #: Idle scratch buffers kept at most (one per concurrent sparse read).
    SCRATCH = 2

    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._planes: dict[Any, tuple[int, np.ndarray]] = {}
        self._blocks: OrderedDict[int, tuple[np.ndarray, list[Any]]] = OrderedDict()
        self._scratch: dict[int, np.ndarray] = {}
        self._ghosts: OrderedDict[Any, None] = OrderedDict()
        self._next = 0
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> np.ndarray | None:
        """Return the cached plane for ``key`` (marking it recently used) or None."""
        with self._lock:
            found = self._planes.get(key)
            if found is None:
                self.misses += 1
                return None
            self._blocks.move_to_end(found[0])
            self.hits += 1
            return found[1]

    def peek(self, key: Any) -> np.ndarray | None:
        """Return the cached plane for ``key`` without counting or reordering."""
        with self._lock:
            found = self._planes.get(key)
            return None if found is None else found[1]

    def touch(self, keys: list[Any]) -> None:
        """Count hits on planes served from the cache and mark them recently used."""
        with self._lock:
            for key in keys:
                found = self._planes.get(key)
                if found is not None:
                    self._blocks.move_to_end(found[0])
                    self.hits += 1

    def count_misses(self, n: int) -> None:
        """Count planes that had to be decoded."""
        with self._lock:
            self.misses += n

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

    def put_block(self, block: np.ndarray, planes: list[tuple[Any, np.ndarray]]) -> None:
        """Store the planes of one decoded block (views of it), evicting LRU blocks.

        Parameters
        ----------
        block : numpy.ndarray
            The buffer the planes live in; it is held (read-only) until evicted.
        planes : list of (key, numpy.ndarray)
            Each plane's key and its view of ``block``.
        """
        if block.nbytes > self.max_bytes:
            return
        block.setflags(write=False)
        with self._lock:
            ident = self._next
            self._next += 1
            keys = []
            for key, view in planes:
                view.setflags(write=False)  # views made before the block turned read-only
                self._ghosts.pop(key, None)
                self._planes[key] = (ident, view)
                keys.append(key)
            self._blocks[ident] = (block, keys)
            self.nbytes += block.nbytes
            self._evict()

    def put(self, key: Any, value: np.ndarray) -> None:
        """Store one plane (copied when it is a view of a larger buffer)."""
        value = value.copy() if value.base is not None else value
        self.put_block(value, [(key, value)])

    def take_scratch(self, nbytes: int) -> np.ndarray:
        """Return a writable byte buffer of at least ``nbytes``: an idle one, else new.

        Parameters
        ----------
        nbytes : int

        Returns
        -------
        numpy.ndarray
            ``uint8``; give it back with :meth:`give_scratch`.
        """
        with self._lock:
            fitting = [(buf.nbytes, ident) for ident, buf in self._scratch.items()
                       if buf.nbytes >= nbytes]
            if fitting:
                _, ident = min(fitting)
                buf = self._scratch.pop(ident)
                del self._blocks[ident]
                self.nbytes -= buf.nbytes
                return buf
        return np.empty(nbytes, dtype=np.uint8)

    def give_scratch(self, buf: np.ndarray) -> None:
        """Keep a scratch buffer for the next sparse read, within the capacity.

        Parameters
        ----------
        buf : numpy.ndarray
            A buffer from :meth:`take_scratch`.
        """
        with self._lock:
            if buf.nbytes > self.max_bytes // 4:
                return
            while len(self._scratch) >= self.SCRATCH:
                smallest = min(self._scratch, key=lambda i: self._scratch[i].nbytes)
                self.nbytes -= self._scratch.pop(smallest).nbytes
                del self._blocks[smallest]
            ident = self._next
            self._next += 1
            self._scratch[ident] = buf
            self._blocks[ident] = (buf, [])
            self.nbytes += buf.nbytes
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used blocks until within capacity (lock held)."""
        while self.nbytes > self.max_bytes and self._blocks:
            ident, (block, keys) = self._blocks.popitem(last=False)
            self.nbytes -= block.nbytes
            self._scratch.pop(ident, None)
            for key in keys:
                found = self._planes.get(key)
                if found is not None and found[0] == ident:
                    del self._planes[key]

    def clear(self) -> None:
        """Drop every entry and zero the counters."""
        with self._lock:
            self._planes.clear()
            self._blocks.clear()
            self._scratch.clear()
            self._ghosts.clear()
            self.nbytes = 0
            self.hits = 0
            self.misses = 0

    def resize(self, max_bytes: int) -> None:
        """Change the capacity, evicting as needed."""
        with self._lock:
            self.max_bytes = int(max_bytes)
            self._evict()

    def info(self) -> dict[str, int]:
        """Return size, capacity, entries (planes), hits and misses."""
        with self._lock:
            return {"bytes": self.nbytes, "max_bytes": self.max_bytes,
                    "entries": len(self._planes), "hits": self.hits, "misses": self.misses}


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


def _after_fork() -> None:
    # A lock held by another thread when the process forked stays held in the
    # child forever: give the child's cache fresh locks (its entries are valid).
    global _cache_lock
    _cache_lock = threading.Lock()
    if _cache is not None:
        _cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _resize(value: int | None) -> None:
    if _cache is not None:
        _cache.resize(default_bytes() if value is None else int(value))


options.on_change("cache_bytes", lambda value: _resize(value))
# Tiles decoded while verification was off must not be served once it is asked
# for again: the next read then goes to librumi, which verifies or refuses.
options.on_change("verify", lambda value: _cache.clear() if _cache is not None else None)


def clear_cache() -> None:
    """Drop every decoded tile this process holds and zero the hit counters.

    Examples
    --------
    >>> rx.clear_cache()
    >>> rx.cache_info()["entries"]
    0
    """
    get_cache().clear()


def cache_info() -> dict[str, int]:
    """Return the tile cache's size, capacity, entries, hits and misses.

    Returns
    -------
    dict
        ``bytes``, ``max_bytes``, ``entries``, ``hits``, ``misses``.

    Examples
    --------
    >>> info = rx.cache_info()
    >>> sorted(info)
    ['bytes', 'entries', 'hits', 'max_bytes', 'misses']
    """
    return get_cache().info()
