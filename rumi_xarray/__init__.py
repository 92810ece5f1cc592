"""xarray and dask backend for Rumi rasters."""

from rumi_xarray import accessor as _accessor  # registers the .rumi accessor
from rumi_xarray.api import chunk, open_dataset
from rumi_xarray.backend import RumiBackendEntrypoint
from rumi_xarray.engine import enable_verification, stats

# Before anything decodes a frame: librumi pins the setting at first use.
enable_verification(required=False)

__all__ = [
    "RumiBackendEntrypoint",
    "chunk",
    "enable_verification",
    "open_dataset",
    "stats",
]
__version__ = "0.1.0"
