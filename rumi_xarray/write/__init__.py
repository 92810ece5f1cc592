"""Writing Rumi files: ``to_rumi``, ``write_array``, what to store, atomic replacement."""
