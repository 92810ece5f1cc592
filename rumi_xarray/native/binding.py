"""cffi (ABI mode) binding of the librumi C functions the Python API lacks.

THE ONE PLACE THAT RELIES ON WHAT rumi-eo DOES NOT PROMISE. Two C functions
earn it: ``rumi_plan_ranges``, a dry run that tells which compressed byte
ranges a selection needs without I/O (``explain()``, the fsspec transport),
and ``rumi_read``/``rumi_read_many`` into a caller's buffer, so a read decodes
straight into the array we return (rumi's Python API returns librumi's own
buffer, whose 4 KiB pages cost more to fault in than numpy's huge pages, and
would need a copy to land inside a larger result).

Both are public functions of librumi's C API (version 1), but the Python
package does not expose them, nor where its shared library lives. The
library is found as rumi itself finds it: ``RUMI_LIB`` when set, else the
file the ``rumi-eo`` distribution installed (read from its package metadata,
a public API). It is the same library ``rumi`` loaded, so both bindings share
one process-wide state (thread pool, checksum setting). The rumi-eo version
and the C API version are checked before first use, and
``tests/test_native.py`` checks the binding against ``rumi.read``. Only
:mod:`rumi_xarray.native.reads` calls this module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Any, cast

import numpy as np
import rumi
from cffi import FFI

_API_VERSION = 1
#: rumi-eo releases whose C API this binding was written and tested against.
SUPPORTED_RUMI = ((0, 26), (0, 27))

_CDEF = """
typedef struct rumi_spec rumi_spec;
typedef struct { uint64_t offset; uint64_t length; } rumi_range;
int rumi_api_version(void);
const char* rumi_last_error(void);
void rumi_free(void* ptr);
int rumi_spec_parse(const unsigned char* blob, size_t blob_size, rumi_spec** out);
void rumi_spec_destroy(rumi_spec* spec);
typedef struct rumi_source rumi_source;
typedef struct {
    rumi_source*     source;
    const rumi_spec* spec;
    int              y_off;
    int              x_off;
} rumi_read_item;
int rumi_source_file(const char* path, rumi_source** out);
int rumi_source_memory(const void* data, size_t size, rumi_source** out);
void rumi_source_free(rumi_source* src);
int rumi_read(rumi_source* src, const rumi_spec* spec,
              const int* times, size_t n_times, const int* bands, size_t n_bands,
              int y_off, int y_size, int x_off, int x_size,
              const char* pattern, void* dst, size_t dst_size);
int rumi_read_many(const rumi_read_item* items, size_t n_items,
                   const int* times, size_t n_times, const int* bands, size_t n_bands,
                   int y_size, int x_size, const char* pattern, void* dst, size_t dst_size);
int rumi_plan_ranges(const rumi_spec* spec,
                     const int* times, size_t n_times,
                     const int* bands, size_t n_bands,
                     int y_off, int y_size, int x_off, int x_size,
                     rumi_range** out, size_t* out_count);
"""

_ffi = FFI()
_ffi.cdef(_CDEF)
_lib: Any = None
_lock = threading.Lock()


def library_path() -> str:
    """Return the path of the librumi shared library that ``rumi`` uses.

    Returns
    -------
    str

    Raises
    ------
    ImportError
        When the rumi-eo distribution lists no shared library.
    """
    explicit = os.environ.get("RUMI_LIB")
    if explicit:
        return explicit
    found = sorted((f for f in metadata.files("rumi-eo") or []
                    if f.name.startswith("librumi")
                    and (f.suffix in (".so", ".dylib", ".dll") or ".so." in f.name)), key=str)
    if not found:
        raise ImportError("the rumi-eo installation lists no librumi shared library; "
                          "set RUMI_LIB to its path")
    return str(found[0].locate())


def check_version(version: str) -> None:
    """Raise unless ``version`` is a rumi-eo release this binding supports.

    Parameters
    ----------
    version : str
        ``rumi.__version__``.

    Raises
    ------
    ImportError
    """
    try:
        key = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        key = (-1, -1)
    low, high = SUPPORTED_RUMI
    if not low <= key < high:
        raise ImportError(
            f"rumi-eo {version} is not supported by this rumi_xarray (it binds librumi's "
            f"C API as shipped in rumi-eo {low[0]}.{low[1]}.x); install rumi-eo "
            f">={low[0]}.{low[1]},<{high[0]}.{high[1]}")


def _library() -> Any:
    """Open librumi once and check that its C API is the one bound here."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                check_version(rumi.__version__)
                # ABI mode: the functions of _CDEF are attributes of the opened library.
                lib: Any = _ffi.dlopen(library_path())
                version = lib.rumi_api_version()
                if version != _API_VERSION:
                    raise ImportError(
                        f"librumi C API {version} is not the version {_API_VERSION} "
                        f"rumi_xarray binds; install a matching rumi-eo")
                _lib = lib
    return _lib


# librumi status codes -> the exception types rumi's own binding raises.
_ERRORS: dict[int, type[Exception]] = {1: ValueError, 2: OSError, 3: ValueError, 4: ValueError,
                                       5: OSError, 6: MemoryError, 7: NotImplementedError,
                                       8: RuntimeError}


def _check(lib: Any, status: int, what: str) -> None:
    if status != 0:
        err = lib.rumi_last_error()
        text = _ffi.string(err) if err else b"unknown error"
        message = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise _ERRORS.get(status, RuntimeError)(f"{what}: {message}")


def _spec(lib: Any, header: bytes) -> Any:
    spec = _ffi.new("rumi_spec**")
    _check(lib, lib.rumi_spec_parse(header, len(header), spec), "header")
    return _ffi.gc(spec[0], lib.rumi_spec_destroy)


def _source(lib: Any, source: Any) -> tuple[Any, Any]:
    """Return a native source handle and the buffer it borrows (kept alive)."""
    out = _ffi.new("rumi_source**")
    if isinstance(source, str):
        _check(lib, lib.rumi_source_file(os.fsencode(source), out), "source")
        keep = None
    else:
        keep = _ffi.from_buffer(source)
        _check(lib, lib.rumi_source_memory(keep, len(keep), out), "source")
    return _ffi.gc(out[0], lib.rumi_source_free), keep


def read_into(dst: np.ndarray, items: Sequence[tuple[Any, bytes, int, int]],
              times: Sequence[int] | None, bands: Sequence[int] | None,
              height: int, width: int) -> None:
    """Decode equal windows of one or more sources into ``dst`` (one native call).

    Parameters
    ----------
    dst : numpy.ndarray
        C-contiguous, writable, shaped ``(n_items, n_times, n_bands, height,
        width)`` of the file's dtype.
    items : sequence of (source, header, row, col)
        ``source`` is a path/URL or a bytes-like file image.
    times, bands : sequence of int or None
    height, width : int
    """
    if not (dst.flags.c_contiguous and dst.flags.writeable):
        raise ValueError("read_into needs a C-contiguous, writable destination")
    lib = _library()
    keep = []
    t_ptr, t_n = _ints(times)
    b_ptr, b_n = _ints(bands)
    # The array itself, not a memoryview of it (dst.data): after a failed read (a file
    # rewritten since it was opened, tests/test_errors.py) the traceback's reference
    # cycle held such a memoryview and cffi's buffer on it, and the garbage collector
    # crashed the interpreter collecting them. The cast is for numpy's stubs, which
    # declare the buffer protocol only for Python >= 3.12.
    target = _ffi.from_buffer(cast(Any, dst))
    if len(items) == 1:
        source, header, row, col = items[0]
        handle, buf = _source(lib, source)
        keep.append(buf)
        _check(lib, lib.rumi_read(handle, _spec(lib, header), t_ptr, t_n, b_ptr, b_n,
                                  row, height, col, width, b"t b y x", target, dst.nbytes),
               "read")
        return
    handles = [_source(lib, source) for source, _, _, _ in items]
    specs = [_spec(lib, header) for _, header, _, _ in items]
    array = _ffi.new("rumi_read_item[]", [
        (handle, spec, row, col)
        for (handle, _), spec, (_, _, row, col) in zip(handles, specs, items, strict=True)])
    _check(lib, lib.rumi_read_many(array, len(items), t_ptr, t_n, b_ptr, b_n, height, width,
                                   b"n t b y x", target, dst.nbytes), "read")
    keep.extend((handles, specs))


def _ints(values: Sequence[int] | None) -> tuple[Any, int]:
    # The C API counts from 1; NULL selects everything.
    if values is None:
        return _ffi.NULL, 0
    return _ffi.new("int[]", [int(v) + 1 for v in values]), len(values)


def plan_ranges(header: bytes, times: Sequence[int] | None, bands: Sequence[int] | None,
                row: int, col: int, height: int, width: int) -> list[tuple[int, int]]:
    """Return librumi's planned ``(offset, length)`` ranges for one window.

    Parameters
    ----------
    header : bytes
        External header of the file.
    times, bands : sequence of int or None
        0-based selections; ``None`` means all.
    row, col, height, width : int
        Window inside the image.

    Returns
    -------
    list of tuple of int
    """
    lib = _library()
    handle = _spec(lib, header)
    t_ptr, t_n = _ints(times)
    b_ptr, b_n = _ints(bands)
    out = _ffi.new("rumi_range**")
    count = _ffi.new("size_t*")
    _check(lib, lib.rumi_plan_ranges(handle, t_ptr, t_n, b_ptr, b_n,
                                     row, height, col, width, out, count), "plan")
    try:
        return [(int(out[0][i].offset), int(out[0][i].length)) for i in range(count[0])]
    finally:
        lib.rumi_free(out[0])
