"""xarray and dask backend for Rumi rasters."""

from rumi_xarray import (
    accessor,  # noqa: F401  (registers the .rumi accessor)
    graph,
)
from rumi_xarray import catalog as catalog_module
from rumi_xarray.api import chunk, open_dataset
from rumi_xarray.backend import RumiBackendEntrypoint
from rumi_xarray.cache import cache_info, clear_cache, set_cache_size
from rumi_xarray.catalog import catalog, open_catalog, open_mfdataset
from rumi_xarray.engine import enable_verification, stats
from rumi_xarray.writer import to_rumi

# Before anything decodes a frame: librumi pins the setting at first use.
enable_verification(required=False)

__all__ = [
    "RumiBackendEntrypoint",
    "cache_info",
    "catalog",
    "catalog_module",
    "chunk",
    "clear_cache",
    "enable_verification",
    "graph",
    "open_catalog",
    "open_dataset",
    "open_mfdataset",
    "set_cache_size",
    "stats",
    "to_rumi",
]
__version__ = "0.1.0"
