"""cffi (ABI mode) binding of the librumi C functions the Python API lacks.

Only ``rumi_plan_ranges`` earns its place: a dry run that tells which
compressed byte ranges a selection needs, without I/O. It backs ``explain()``
and the fsspec transport. The library is the one shipped in the ``rumi-eo``
wheel, so both bindings share the process-wide state of one librumi.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import rumi
from cffi import FFI

_API_VERSION = 1

_CDEF = """
typedef struct rumi_spec rumi_spec;
typedef struct { uint64_t offset; uint64_t length; } rumi_range;
int rumi_api_version(void);
const char* rumi_last_error(void);
void rumi_free(void* ptr);
int rumi_spec_parse(const unsigned char* blob, size_t blob_size, rumi_spec** out);
void rumi_spec_destroy(rumi_spec* spec);
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


def _library() -> Any:
    """Open librumi once and check that its C API is the one bound here."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                folder = Path(rumi.__file__).parent / "_lib"
                found = sorted(folder.glob("librumi*"))
                if not found:
                    raise ImportError(f"librumi not found in {folder}")
                lib = _ffi.dlopen(str(found[0]))
                version = lib.rumi_api_version()
                if version != _API_VERSION:
                    raise ImportError(
                        f"librumi C API {version} is not the version {_API_VERSION} "
                        f"rumi_xarray binds; install a matching rumi-eo")
                _lib = lib
    return _lib


def _check(lib: Any, status: int, what: str) -> None:
    if status != 0:
        err = lib.rumi_last_error()
        message = _ffi.string(err).decode("utf-8", "replace") if err else "unknown error"
        raise ValueError(f"{what}: {message}")


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
    spec = _ffi.new("rumi_spec**")
    _check(lib, lib.rumi_spec_parse(header, len(header), spec), "header")
    handle = _ffi.gc(spec[0], lib.rumi_spec_destroy)
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
