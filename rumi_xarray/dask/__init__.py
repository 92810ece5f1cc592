"""Everything that talks to dask: read-group chunk sizes, cluster probes, graph reading.

This is the only folder of rumi_xarray that imports dask or distributed.
rumi_xarray builds no dask graph of its own for reads: xarray's standard
chunking (``dask.array.from_array`` over the lazily indexed backend array)
makes plain dask arrays, and what makes them fast is the chunk shape chosen
here (whole frames, grouped into one native call per chunk).
"""
