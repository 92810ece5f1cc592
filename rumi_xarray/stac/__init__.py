"""STAC in and out: Rumi files as STAC Items, and cubes from STAC Items.

- :mod:`~rumi_xarray.stac.items`: ``rx.to_stac`` (files or a catalog table ->
  pystac Items, one Rumi asset each, the header inside);
- :mod:`~rumi_xarray.stac.geoparquet`: the same Items as a stac-geoparquet table;
- :mod:`~rumi_xarray.stac.parse`: Items (pystac, dicts, geoparquet) -> what a
  reader needs, with typed errors naming the item;
- :mod:`~rumi_xarray.stac.grid`: the output grid (odc-geo GeoBox) of a load;
- :mod:`~rumi_xarray.stac.plan`: pure planning of a load across grids (time
  groups, which items touch which output chunk, source windows, native calls);
- :mod:`~rumi_xarray.stac.mosaic`: one output chunk: read, reproject (odc-geo),
  mosaic;
- :mod:`~rumi_xarray.stac.graph`: the dask graph of a load across grids (one
  task per output chunk), beside the planner and reader it runs, as odc-loader
  keeps its graph builder;
- :mod:`~rumi_xarray.stac.archive`: loads over a stac-geoparquet archive, each
  output chunk looking its Items up when it runs;
- :mod:`~rumi_xarray.stac.load`: ``rx.open_stac``.

Importing this package imports nothing heavy; pystac, odc-geo and
stac-geoparquet (the ``stac`` extra) load with the module that needs them.
"""
