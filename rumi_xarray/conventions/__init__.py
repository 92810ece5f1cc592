"""xarray, CF and rioxarray conventions, the read side and the write side of each together.

:mod:`~rumi_xarray.conventions.time` (instants, intervals, bounds),
:mod:`~rumi_xarray.conventions.georef` (transform, CRS, x/y, spatial_ref) and
:mod:`~rumi_xarray.conventions.bands` (band names and their parsed parts).
"""
