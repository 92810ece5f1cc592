"""dask: the chunk policy, what dask is configured to do, cluster probes, graphs.

:mod:`~rumi_xarray.dask.chunks` is the one chunk policy (read groups, open_dataset
chunks, STAC output chunks, the chunks data is written in);
:mod:`~rumi_xarray.dask.config` reports dask's settings;
:mod:`~rumi_xarray.dask.cluster` the worker a process runs in;
:mod:`~rumi_xarray.dask.graphs` the reads a graph will run (``explain()``);
:mod:`~rumi_xarray.dask.optimize` dask's ``array_optimize`` hook.

Every module here may import dask or distributed; outside this folder only
two named modules may, each beside the code it runs: :mod:`rumi_xarray.stac.graph`
(the graph of a STAC load) and :mod:`rumi_xarray.write.batches` (the dask side
of writing). ``tests/test_architecture.py`` holds the list.

rumi_xarray builds no dask graph of its own for reads: xarray's standard
chunking (``dask.array.from_array`` over the lazily indexed backend array)
makes plain dask arrays, and what makes them fast is the chunk shape chosen
here (whole frames, grouped into one native call per chunk).
"""
