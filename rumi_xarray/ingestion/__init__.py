"""Ingest: an archive of GeoTIFFs, COGs, netCDF or STAC Items becomes Rumi files and a catalog.

``plan`` turns sources into one task per output, with the provenance a rerun
compares (nothing is read but ``stat`` or one metadata request per source);
``task`` is what a worker runs for one output; ``execute`` runs tasks on a
dask.distributed cluster or local processes; ``table`` keeps the catalog
folder, appended as outputs finish; ``run`` is :func:`rumi_xarray.ingest`.
"""

from rumi_xarray.ingestion.run import IngestReport, ingest

__all__ = ["IngestReport", "ingest"]
