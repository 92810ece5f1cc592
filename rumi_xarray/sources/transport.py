"""fsspec as a transport for sources librumi's own transport cannot reach.

librumi (Karu) reads local files and ``http(s)``, ``s3``, ``gs``, ``az``,
``abfs`` and ``hf`` URLs itself. For anything else (``memory://``, chained
``simplecache::s3://...``, an open file object) we plan the byte ranges with
librumi, fetch exactly those with fsspec's concurrent ``cat_ranges`` (or
``seek``/``read``), place them in a sparse in-memory image of the file and
let librumi decode from memory. The file is never downloaded whole.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any, cast

import numpy as np

from rumi_xarray.sources import redact
from rumi_xarray.sources.location import Source, locate

#: Bytes fetched from each end of a file to read its metadata, doubled while
#: the trailer does not fit (librumi's own transport starts with 16 KiB too).
META_PROBE = 16384


class RangeSource:
    """A source read through byte ranges: an fsspec URL or an open file object."""

    name: str
    #: Where it lives, for :func:`~rumi_xarray.sources.location.locate`.
    location: Source

    def size(self) -> int:
        """Return the file size in bytes."""
        raise TypeError(f"{type(self).__name__} does not define size()")

    def fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Return the bytes of each ``(offset, length)`` range."""
        raise TypeError(f"{type(self).__name__} does not define fetch()")

    def image(self, ranges: Iterable[tuple[int, int]]) -> memoryview:
        """Return a sparse image of the file holding ``ranges``.

        Untouched pages of the zero-filled buffer are never committed by the
        OS, so a large file costs memory only for the ranges fetched.

        Parameters
        ----------
        ranges : iterable of (offset, length)

        Returns
        -------
        memoryview
        """
        size = self.size()
        merged = merge_ranges(ranges, size)
        image = np.zeros(size, dtype=np.uint8)
        for (offset, length), data in zip(merged, self.fetch(merged), strict=True):
            if len(data) != length:
                raise OSError(f"{self.name}: asked for {length} bytes at {offset}, "
                              f"got {len(data)}")
            image[offset:offset + length] = np.frombuffer(data, dtype=np.uint8)
        _count(sum(length for _, length in merged))
        # The cast is for numpy's stubs: ndarray has the buffer protocol (declared to type
        # checkers only for Python >= 3.12).
        return memoryview(cast(Any, image))

    def metadata_images(self) -> Iterator[memoryview]:
        """Yield sparse images holding ever larger heads and tails of the file.

        The caller stops at the first image whose metadata parse; a large
        trailer (many bands or time steps) makes the next, larger probe.
        """
        size = self.size()
        probe = META_PROBE
        while True:
            yield self.image([(0, min(probe, size)), (max(0, size - probe), min(probe, size))])
            if probe >= size:
                return
            probe *= 4


def merge_ranges(ranges: Iterable[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """Sort, clip and merge overlapping or touching ranges.

    Parameters
    ----------
    ranges : iterable of (offset, length)
    size : int
        File size; ranges are clipped to it.

    Returns
    -------
    list of (offset, length)
    """
    spans = sorted((max(0, o), min(size, o + n)) for o, n in ranges if n > 0)
    out: list[list[int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e - s) for s, e in out if e > s]


class FsspecSource(RangeSource):
    """A URL read through fsspec (picklable: URL and storage options only).

    Parameters
    ----------
    url : str
    storage_options : dict, optional
        Never shown in reprs or messages.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.name = redact.redact(url)
        self.location = locate(url)
        self._fs: Any = None
        self._path: str | None = None
        self._size: int | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], state["storage_options"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"FsspecSource({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FsspecSource) and other.url == self.url
                and other.storage_options == self.storage_options)

    def __hash__(self) -> int:
        return hash(self.url)

    def __dask_tokenize__(self) -> tuple[str, str]:
        return ("FsspecSource", self.url)

    def _open(self) -> tuple[Any, str]:
        with self._lock:
            if self._fs is None:
                import fsspec

                self._fs, self._path = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return self._fs, self._path  # type: ignore[return-value]

    def size(self) -> int:
        """Return the file size (asked once per process and source)."""
        if self._size is None:
            fs, path = self._open()
            try:
                self._size = int(fs.size(path))
            except FileNotFoundError:
                raise FileNotFoundError(f"{self.name}: no such file") from None
        return self._size

    def fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Fetch ranges concurrently with fsspec's ``cat_ranges``."""
        from rumi_xarray.sources import retry

        fs, path = self._open()
        starts = [o for o, _ in ranges]
        ends = [o + n for o, n in ranges]

        def attempt() -> list[bytes]:
            out = list(fs.cat_ranges([path] * len(ranges), starts, ends))
            for item in out:
                # cat_ranges returns (does not raise) the exception of a failed range.
                if isinstance(item, BaseException):
                    raise item
            return out

        # Retried as Karu retries librumi's own reads; what still fails is an OSError
        # naming the file (typed by the read that called us), never a raw aiohttp error.
        try:
            return retry.call(attempt)
        except Exception as exc:
            raise OSError(f"{self.name}: reading {len(ranges)} range(s) failed: "
                          f"{type(exc).__name__}: {exc}") from exc


class FileObjectSource(RangeSource):
    """An open binary file object, read with ``seek``/``read`` under a lock.

    Parameters
    ----------
    fileobj : object
        Supports ``seek``, ``read`` and ``tell``.
    """

    def __init__(self, fileobj: Any) -> None:
        self.fileobj = fileobj
        self.name = f"<file object {getattr(fileobj, 'name', type(fileobj).__name__)}>"
        self.location = Source("file")
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileObjectSource({self.name})"

    def __getstate__(self) -> dict[str, Any]:
        return {"fileobj": self.fileobj}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["fileobj"])  # type: ignore[misc]

    def __dask_tokenize__(self) -> tuple[str, int]:
        return ("FileObjectSource", id(self.fileobj))

    def size(self) -> int:
        """Return the size by seeking to the end."""
        with self._lock:
            here = self.fileobj.tell()
            end = self.fileobj.seek(0, 2)
            self.fileobj.seek(here)
        return int(end)

    def fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Read each range; the lock keeps seek+read pairs atomic across threads."""
        out = []
        with self._lock:
            for offset, length in ranges:
                self.fileobj.seek(offset)
                out.append(self.fileobj.read(length))
        return out


class TransportStats:
    """Bytes fetched through fsspec in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fetched = 0


STATS = TransportStats()


def _count(n: int) -> None:
    with STATS.lock:
        STATS.fetched += n
