"""xarray's side of rumi_xarray: entry point, backend array, lazy reads, Dataset, accessor.

:mod:`~rumi_xarray.backend.entrypoint` is what xarray imports when it lists
engines; it imports nothing heavy. :mod:`~rumi_xarray.backend.array` is the
lazily indexed backend array: :mod:`~rumi_xarray.backend.route` decides how
one selection is read (window, scattered cells, the tile cache of
:mod:`~rumi_xarray.backend.cache`), :mod:`~rumi_xarray.backend.execute` runs
it,
:mod:`~rumi_xarray.backend.dataset` builds the Dataset and
:mod:`~rumi_xarray.backend.accessor` adds ``.rumi``.
"""
