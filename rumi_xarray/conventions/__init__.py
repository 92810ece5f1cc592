"""xarray, CF and rioxarray conventions: what a Rumi file's facts and labels mean in xarray.

Read side and write side of each label together: :mod:`~rumi_xarray.conventions.time`
(instants, intervals, bounds), :mod:`~rumi_xarray.conventions.georef` (transform,
CRS, x/y, spatial_ref), :mod:`~rumi_xarray.conventions.bands` (band names and
their parsed parts). CF facts: :mod:`~rumi_xarray.conventions.facts` (the
``Facts`` type and its one codec: the place to add a fact),
:mod:`~rumi_xarray.conventions.sidecar` (the sidecar file, read and written),
:mod:`~rumi_xarray.conventions.cf` (the CF attributes a read gives); packing on
write is :mod:`rumi_xarray.write.packing`. Also
:mod:`~rumi_xarray.conventions.crs_index` (xarray refuses to mix CRSs) and
:mod:`~rumi_xarray.conventions.netcdf` (what ``to_netcdf`` needs for CF 1.11).
"""
