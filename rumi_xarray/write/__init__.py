"""Writing Rumi files: to_rumi, what to store, CF packing, masks, dask batches, atomic files."""
