"""Parquet tables by content: each file's size and footer digest, checked before pyarrow reads.

A catalog or stac-geoparquet table is read twice: at open (footers, the time
column, one row) and again by every task that looks its rows up. Between the
two a nightly job may rewrite it, keeping the row-group shape, so the rows a
task reads would no longer be those the open labelled. A file is therefore
identified by its content, :class:`FileIdentity` (its size and the SHA-256 of
its footer: the schema, every row group's offsets, sizes and statistics),
taken at open and compared at every read; a file whose identity changed is
refused by name (:class:`~rumi_xarray.errors.RumiFileChangedError`).

The footer is read here, checked (magic bytes, lengths, every column chunk
inside the file) and handed to pyarrow as parsed metadata, so the check costs
no request pyarrow would not make anyway, and a corrupt footer becomes a
typed error (:class:`~rumi_xarray.errors.RumiCatalogError`) before pyarrow's
C++ reader sees offsets that lie outside the file. Reads of remote files are
retried as Karu retries (:mod:`rumi_xarray.sources.retry`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from rumi_xarray.errors import RumiCatalogError, RumiFileChangedError

#: Bytes read from the end of a file to find its footer (most footers fit).
TAIL = 64 * 1024
#: The Parquet magic at both ends of a file.
MAGIC = b"PAR1"
#: Footers a process keeps parsed and checked, by identity (see :func:`read_footer`).
PARSED_FOOTERS = 64


@dataclass(frozen=True)
class FileIdentity:
    """What a Parquet file is: its size and the SHA-256 of its footer.

    Attributes
    ----------
    size : int
        Bytes.
    footer : str
        Hex SHA-256 of the footer (metadata, its length and the magic).
    """

    size: int
    footer: str

    def differences(self, other: FileIdentity) -> str:
        """Return how ``other`` (the file now) differs from this identity, for messages.

        Parameters
        ----------
        other : FileIdentity

        Returns
        -------
        str

        Examples
        --------
        >>> FileIdentity(10, "ab").differences(FileIdentity(12, "ab"))
        'its size changed from 10 to 12 bytes'
        """
        if other.size != self.size:
            return f"its size changed from {self.size} to {other.size} bytes"
        return "its footer changed (same size)"


@dataclass(frozen=True)
class Footer:
    """A file's footer as read and checked: its identity and pyarrow's parsed metadata."""

    identity: FileIdentity
    metadata: Any


def read_footer(fs: Any, path: str, name: str, *, local: bool) -> Footer:
    """Read, check and parse the footer of one Parquet file.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem or None
        The file's filesystem (unused when ``local``).
    path : str
        The file on ``fs`` (or a local path).
    name : str
        Credential-free name for messages.
    local : bool
        A local path (read with the standard library).

    Returns
    -------
    Footer

    Raises
    ------
    RumiCatalogError
        The file is not a readable Parquet file (no magic, a footer longer
        than the file, column chunks outside the file).
    OSError
        What reading the file raised (callers retry and type it).

    Examples
    --------
    >>> import pandas as pd, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    >>> read_footer(None, path, "t.parquet", local=True).metadata.num_rows
    2
    """
    if local:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - TAIL))
            tail = f.read()
            f.seek(0)
            head = f.read(len(MAGIC))
    else:
        size = int(fs.size(path))
        tail = bytes(fs.cat_file(path, start=max(0, size - TAIL), end=size))
        head = MAGIC  # a remote head costs a request; the checks below find bad footers
    if size < 12 or head != MAGIC or tail[-4:] != MAGIC:
        raise RumiCatalogError(f"{name}: not a readable Parquet table (no PAR1 magic at both "
                               f"ends of its {size} bytes): truncated, or not written by a "
                               f"Parquet writer")
    length = int.from_bytes(tail[-8:-4], "little")
    if length <= 0 or length + 12 > size:
        raise RumiCatalogError(f"{name}: corrupt Parquet footer (it claims {length} bytes "
                               f"in a {size}-byte file)")
    if length + 8 > len(tail):
        start = size - length - 8
        more = _range(fs, path, start, size - len(tail), local=local)
        tail = more + tail
    footer = tail[-(length + 8):]
    identity = FileIdentity(size, hashlib.sha256(footer).hexdigest())
    # The checks and the parse depend on the footer's bytes and the file's size alone,
    # which the identity fixes: a footer seen before (the same table opened again, a
    # task reading its rows) is not checked again, which was most of a small table's
    # open. Failures are not kept: a bad footer is refused every time.
    with _parsed_lock:
        metadata = _parsed.get(identity)
        if metadata is not None:
            _parsed.move_to_end(identity)
    if metadata is None:
        metadata = _parse(footer, size, name)
        with _parsed_lock:
            _parsed[identity] = metadata
            while len(_parsed) > PARSED_FOOTERS:
                _parsed.popitem(last=False)
    return Footer(identity, metadata)


_parsed: OrderedDict[FileIdentity, Any] = OrderedDict()
_parsed_lock = threading.Lock()


def _range(fs: Any, path: str, start: int, end: int, *, local: bool) -> bytes:
    if local:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(end - start)
    return bytes(fs.cat_file(path, start=start, end=end))


def _parse(footer: bytes, size: int, name: str) -> Any:
    """Return pyarrow's metadata of a footer, after checking it describes this file."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        # Column chunk types are checked first: pyarrow aborts the process on a mismatch.
        _check_column_types(footer[:-8])
        # A file holding only the magic and the footer: pyarrow parses the metadata
        # from it (its Thrift decoder raises Python errors on bad bytes).
        metadata = pq.read_metadata(pa.BufferReader(MAGIC + footer))
        rows = 0
        data_end = size - len(footer)
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            if group.num_rows < 0:
                raise ValueError(f"row group {g} has {group.num_rows} rows")
            rows += group.num_rows
            for j in range(group.num_columns):
                chunk = group.column(j)
                starts = [v for v in (chunk.dictionary_page_offset, chunk.data_page_offset)
                          if v is not None]
                first = min(starts) if starts else -1
                if (first < len(MAGIC) or chunk.total_compressed_size < 0
                        or first + chunk.total_compressed_size > data_end
                        or chunk.num_values < 0):
                    raise ValueError(f"row group {g} column {j} lies outside the file "
                                     f"(offset {first}, {chunk.total_compressed_size} bytes)")
        if rows != metadata.num_rows:
            raise ValueError(f"its row groups hold {rows} rows, the file {metadata.num_rows}")
        metadata.schema.to_arrow_schema()
    except (ValueError, TypeError, OSError, OverflowError, pa.ArrowException) as exc:
        raise RumiCatalogError(f"{name}: corrupt Parquet footer: {exc}") from None
    return metadata


# Thrift compact-protocol field types (the encoding of Parquet footers).
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12
#: Parquet's physical types (Type enum), BOOLEAN (0) to FIXED_LEN_BYTE_ARRAY (7).
_PHYSICAL_TYPES = range(8)


class _Compact:
    """A bounds-checked reader of Thrift's compact protocol (Parquet footers).

    It reads the few footer fields pyarrow's C++ reader trusts without a Python
    error (a column chunk's physical type).
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise ValueError("the metadata ends early")
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 70:
                raise ValueError("a varint is too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip_bytes(self, n: int) -> None:
        if n < 0 or self.at + n > len(self.data):
            raise ValueError("the metadata ends early")
        self.at += n

    def fields(self) -> Any:
        """Yield (field id, type) of one struct until its stop; the caller reads or skips."""
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == _STOP:
                return
            delta = head >> 4
            last = last + delta if delta else self.zigzag()
            yield last, kind

    def list_header(self) -> tuple[int, int]:
        head = self.byte()
        size = head >> 4
        if size == 15:
            size = self.varint()
        if size > len(self.data):
            raise ValueError(f"a list claims {size} elements")
        return size, head & 0x0F

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > 64:
            raise ValueError("the metadata nests too deep")
        if kind in (_TRUE, _FALSE):
            return
        if kind == _BYTE:
            self.skip_bytes(1)
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.skip_bytes(8)
        elif kind == _BINARY:
            self.skip_bytes(self.varint())
        elif kind in (_LIST, _SET):
            size, item = self.list_header()
            for _ in range(size):
                if item in (_TRUE, _FALSE):
                    self.skip_bytes(1)
                else:
                    self.skip(item, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                kinds = self.byte()
                for _ in range(size):
                    self.skip(kinds >> 4, depth + 1)
                    self.skip(kinds & 0x0F, depth + 1)
        elif kind == _STRUCT:
            for _, inner in self.fields():
                self.skip(inner, depth + 1)
        else:
            raise ValueError(f"unknown Thrift type {kind}")


def _check_column_types(metadata: bytes) -> None:
    """Raise ValueError unless every column chunk agrees with its schema leaf.

    pyarrow's C++ reader refuses a chunk whose physical type is not its leaf's (or
    is unknown), or whose size statistics do not fit the leaf's levels, by throwing
    where no Python error can be raised, which ends the process; read here first,
    it is a typed error.
    """
    reader = _Compact(metadata)
    # schema elements in depth-first order: (physical type, children, repetition)
    elements: list[tuple[int | None, int, int]] = []
    chunks: list[list[tuple[int | None, int, int, bool]]] = []
    for field, kind in reader.fields():
        if field == 2 and kind == _LIST:  # schema: list<SchemaElement>
            size, _ = reader.list_header()
            for _ in range(size):
                physical, children, repetition = None, 0, 0
                for inner, inner_kind in reader.fields():
                    if inner == 1 and inner_kind == _I32:
                        physical = reader.zigzag()
                    elif inner == 3 and inner_kind == _I32:
                        repetition = reader.zigzag()
                    elif inner == 5 and inner_kind == _I32:
                        children = reader.zigzag()
                    else:
                        reader.skip(inner_kind)
                elements.append((physical, children, repetition))
        elif field == 4 and kind == _LIST:  # row_groups: list<RowGroup>
            size, _ = reader.list_header()
            for _ in range(size):
                group: list[tuple[int | None, int, int, bool]] = []
                for inner, inner_kind in reader.fields():
                    if inner == 1 and inner_kind == _LIST:  # columns: list<ColumnChunk>
                        count, _ = reader.list_header()
                        for _ in range(count):
                            group.append(_column_chunk(reader))
                    else:
                        reader.skip(inner_kind)
                chunks.append(group)
        else:
            reader.skip(kind)
    leaves = _leaves(elements)
    for g, group in enumerate(chunks):
        if len(group) != len(leaves):
            raise ValueError(f"row group {g} has {len(group)} columns, the schema {len(leaves)}")
        for j, ((physical, reps, defs, unencoded), (leaf, max_rep, max_def)) in enumerate(
                zip(group, leaves, strict=True)):
            if physical is None or physical not in _PHYSICAL_TYPES or physical != leaf:
                raise ValueError(f"row group {g} column {j} has physical type {physical}, "
                                 f"its schema {leaf}")
            if (reps not in (0, max_rep + 1) or defs not in (0, max_def + 1)
                    or (unencoded and physical != _BYTE_ARRAY)):
                raise ValueError(f"row group {g} column {j} has size statistics that do not "
                                 f"fit its schema")


#: Parquet's BYTE_ARRAY physical type, the only one with unencoded byte sizes.
_BYTE_ARRAY = 6
#: Parquet's REQUIRED and REPEATED repetition types.
_REQUIRED, _REPEATED = 0, 2


def _column_chunk(reader: _Compact) -> tuple[int | None, int, int, bool]:
    """Read one ColumnChunk's physical type and size statistics.

    Returns the type, the lengths of the repetition and definition level
    histograms, and whether unencoded byte sizes are given.
    """
    physical, reps, defs, unencoded = None, 0, 0, False
    for part, part_kind in reader.fields():
        if part == 3 and part_kind == _STRUCT:  # meta_data: ColumnMetaData
            for leaf, leaf_kind in reader.fields():
                if leaf == 1 and leaf_kind == _I32:
                    physical = reader.zigzag()
                elif leaf == 16 and leaf_kind == _STRUCT:  # size_statistics
                    for stat, stat_kind in reader.fields():
                        if stat == 1:
                            unencoded = True
                            reader.skip(stat_kind)
                        elif stat in (2, 3) and stat_kind == _LIST:
                            length, item = reader.list_header()
                            for _ in range(length):
                                reader.skip(item)
                            reps, defs = (length, defs) if stat == 2 else (reps, length)
                        else:
                            reader.skip(stat_kind)
                else:
                    reader.skip(leaf_kind)
        else:
            reader.skip(part_kind)
    return physical, reps, defs, unencoded


def _leaves(elements: list[tuple[int | None, int, int]]) -> list[tuple[int | None, int, int]]:
    """Return each leaf's (physical type, max repetition level, max definition level)."""
    leaves: list[tuple[int | None, int, int]] = []
    # (children still to visit, repetition level, definition level) of open groups
    stack: list[list[int]] = []
    for k, (physical, children, repetition) in enumerate(elements):
        rep = stack[-1][1] if stack else 0
        dfn = stack[-1][2] if stack else 0
        if stack:
            stack[-1][0] -= 1
        if children < 0 or (k and repetition not in (0, 1, _REPEATED)):
            raise ValueError(f"schema element {k} has {children} children and "
                             f"repetition {repetition}")
        if k:  # the root's repetition does not count
            rep += repetition == _REPEATED
            dfn += repetition != _REQUIRED
        if children > 0:
            stack.append([children, rep, dfn])
        else:
            leaves.append((physical, rep, dfn))
        while stack and stack[-1][0] <= 0:
            stack.pop()
    return leaves


def open_file(fs: Any, path: str, name: str, *, local: bool,
              expected: FileIdentity | None = None) -> tuple[Any, FileIdentity]:
    """Return a ``pyarrow.parquet.ParquetFile`` of a checked footer, and the file's identity.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem or None
    path : str
    name : str
        Credential-free name for messages.
    local : bool
    expected : FileIdentity, optional
        The identity the file had at open: a different one is refused.

    Returns
    -------
    tuple
        The ParquetFile (reading only the ranges pyarrow asks for) and the identity.

    Raises
    ------
    RumiFileChangedError
        The file is not the one ``expected`` describes.
    RumiCatalogError
        A corrupt footer.

    Examples
    --------
    >>> import pandas as pd, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    >>> pf, identity = open_file(None, path, "t.parquet", local=True)
    >>> pf.read().num_rows, identity.size == os.path.getsize(path)
    (2, True)
    """
    import pyarrow.parquet as pq

    footer = read_footer(fs, path, name, local=local)
    check(footer.identity, expected, name)
    if local:
        return pq.ParquetFile(path, metadata=footer.metadata), footer.identity
    # fsspec's default read-ahead cache would fetch megabytes past every read (a whole
    # small table for its footer); pyarrow already reads whole column chunks and
    # coalesces those of a row group (pre_buffer).
    handle = fs.open(path, "rb", cache_type="none", size=footer.identity.size)
    return (pq.ParquetFile(handle, metadata=footer.metadata, pre_buffer=True),
            footer.identity)


def check(found: FileIdentity, expected: FileIdentity | None, name: str) -> None:
    """Raise naming the file when ``found`` is not the identity it had at open.

    Parameters
    ----------
    found : FileIdentity
        The file now.
    expected : FileIdentity or None
        The file at open (None: nothing to compare).

    Raises
    ------
    RumiFileChangedError

    Examples
    --------
    >>> check(FileIdentity(1, "a"), FileIdentity(1, "a"), "t.parquet")
    """
    if expected is not None and found != expected:
        raise RumiFileChangedError(
            f"{name}: the table changed since it was opened ({expected.differences(found)}); "
            f"its rows are no longer those the open labelled: open it again")
