"""dask for the read path: read-group chunk sizes, cluster probes, graph reading.

Every module here may import dask or distributed; outside this folder only
two named modules may, each beside the code it runs: :mod:`rumi_xarray.stac.graph`
(the graph of a STAC load) and :mod:`rumi_xarray.write.batches` (the dask side
of writing). ``tests/test_architecture.py`` holds the list.

rumi_xarray builds no dask graph of its own for reads: xarray's standard
chunking (``dask.array.from_array`` over the lazily indexed backend array)
makes plain dask arrays, and what makes them fast is the chunk shape chosen
here (whole frames, grouped into one native call per chunk).
"""
