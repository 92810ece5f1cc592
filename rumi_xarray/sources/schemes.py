"""Which URL schemes and GDAL virtual paths librumi reads, and the URLs those paths name.

The tables :func:`rumi_xarray.sources.location.locate` decides by and
:mod:`rumi_xarray.sources.redact` names sources by: a new remote scheme is a
line here. Data and syntax only (no package imports), so that both, and
:mod:`rumi_xarray.errors` through redact, can use them without a cycle.
"""

from __future__ import annotations

#: URL schemes librumi's transport (Karu) reads itself. Anything else goes through fsspec.
NATIVE_SCHEMES = frozenset({"file", "http", "https", "s3", "gs", "az", "abfs", "hf"})

#: GDAL virtual file systems naming objects of a store -> the URL prefix they stand for.
#: ``_streaming`` variants read the same objects (GDAL's streaming is an access hint).
VSI_STORES = {"vsis3": "s3://", "vsigs": "gs://", "vsiaz": "az://", "vsiadls": "abfs://",
              "vsihf": "hf://", "vsioss": "oss://", "vsiswift": "swift://",
              "vsihdfs": "hdfs://"}
#: ``/vsicurl/`` takes the URL itself after the prefix.
VSI_CURL = "vsicurl"
#: GDAL's (and Karu's) other virtual file systems: in-process memory, archives, byte
#: slices, encryption, stdin. None names an object by URL, so none is read.
VSI_REFUSED = frozenset({"vsimem", "vsizip", "vsigzip", "vsitar", "vsi7z", "vsirar",
                         "vsistdin", "vsistdout", "vsisubfile", "vsisparse", "vsicrypt",
                         "vsicached", "vsiwebhdfs", "vsisource"})


def written_as_url(text: str) -> bool:
    """Return whether ``text`` is written as a URL (``scheme://...``), whatever it names.

    The syntax test behind :func:`rumi_xarray.sources.location.locate`, for
    code that parses text rather than opening it (redaction, STAC hrefs).

    Parameters
    ----------
    text : str

    Returns
    -------
    bool
    """
    return "://" in text
