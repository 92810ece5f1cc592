"""Writing Rumi files: ``to_rumi``, what to store, dask batches, atomic replacement."""
