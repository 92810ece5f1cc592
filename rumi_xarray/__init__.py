"""xarray and dask backend for Rumi rasters.

``import rumi_xarray`` is light: it registers the ``.rumi`` accessor and
nothing else happens until a function is used (librumi, dask and pandas load
then). It makes one process-wide setting: librumi's frame checksum
verification is turned on (``RUMI_VERIFY=1`` in ``os.environ`` unless
``RUMI_VERIFY`` is set, and librumi's own setter if librumi is loaded
already), so every read after the import is verified, librumi's own
``rumi.read`` included; ``RUMI_VERIFY=0`` keeps it off. librumi's thread pool
is sized at the first read, from :func:`set_options`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from rumi_xarray import errors as _errors
from rumi_xarray.backend import accessor as _accessor  # noqa: F401  (registers .rumi)
from rumi_xarray.errors import *  # noqa: F403  (the error classes: errors.__all__)
from rumi_xarray.options import get_options, set_options
from rumi_xarray.options import on_set as _on_set
from rumi_xarray.options import verify_from_import as _verify_from_import


def _apply_verify(on: bool, restoring: bool) -> None:
    """Apply ``verify`` to librumi whenever it is set, changed or not.

    At once, so a direct ``rumi.read`` after ``set_options(verify=True)`` is
    verified too (librumi fixes the setting at its first frame); librumi loads
    only then, never at import. Setting is strict; restoring at the end of a
    ``with`` block never raises: if verification was pinned off inside it, the
    reads after it refuse and say why. Wired here because the settings
    registry sits below ``native/``.
    """
    from rumi_xarray.native import checksums

    checksums.apply(bool(on), strict=not restoring)


_on_set("verify", _apply_verify)
_verify_from_import()  # the one process-wide setting the import makes (see the docstring)

if TYPE_CHECKING:  # what __getattr__ imports on first use, for type checkers
    from rumi_xarray.backend.accessor import Explanation, explain
    from rumi_xarray.backend.cache import cache_info, clear_cache
    from rumi_xarray.backend.chips import explain_chips, read_chips
    from rumi_xarray.backend.entrypoint import RumiBackendEntrypoint
    from rumi_xarray.backend.open import open_dataset, overview_factors
    from rumi_xarray.catalogs.cube import open_catalog, open_catalog_grids, open_mfdataset
    from rumi_xarray.catalogs.table import catalog
    from rumi_xarray.ingestion.run import IngestReport, ingest
    from rumi_xarray.native.stats import stats
    from rumi_xarray.stac.items import to_stac
    from rumi_xarray.stac.load import open_stac
    from rumi_xarray.write.to_rumi import to_rumi, write_array

#: Public name -> module defining it, imported on first use.
_LAZY = {
    "open_dataset": "rumi_xarray.backend.open",
    "overview_factors": "rumi_xarray.backend.open",
    "open_catalog": "rumi_xarray.catalogs.cube",
    "open_catalog_grids": "rumi_xarray.catalogs.cube",
    "open_mfdataset": "rumi_xarray.catalogs.cube",
    "catalog": "rumi_xarray.catalogs.table",
    "to_stac": "rumi_xarray.stac.items",
    "open_stac": "rumi_xarray.stac.load",
    "to_rumi": "rumi_xarray.write.to_rumi",
    "write_array": "rumi_xarray.write.to_rumi",
    "ingest": "rumi_xarray.ingestion.run",
    "IngestReport": "rumi_xarray.ingestion.run",
    "stats": "rumi_xarray.native.stats",
    "cache_info": "rumi_xarray.backend.cache",
    "clear_cache": "rumi_xarray.backend.cache",
    "explain": "rumi_xarray.backend.accessor",
    "read_chips": "rumi_xarray.backend.chips",
    "explain_chips": "rumi_xarray.backend.chips",
    "Explanation": "rumi_xarray.backend.accessor",
    "RumiBackendEntrypoint": "rumi_xarray.backend.entrypoint",
}

__all__ = [
    "Explanation",
    "IngestReport",
    "RumiBackendEntrypoint",
    "cache_info",
    "catalog",
    "clear_cache",
    "explain",
    "explain_chips",
    "get_options",
    "ingest",
    "open_catalog",
    "open_catalog_grids",
    "open_dataset",
    "open_mfdataset",
    "open_stac",
    "overview_factors",
    "read_chips",
    "set_options",
    "stats",
    "to_rumi",
    "to_stac",
    "write_array",
]
__all__ += _errors.__all__

try:
    __version__ = version("rumi-xarray")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rumi_xarray' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
