"""What to read, and how: grid geometry, scenes and cubes, read planning, selections.

Pure Python: nothing here does I/O or imports librumi or dask.
"""
