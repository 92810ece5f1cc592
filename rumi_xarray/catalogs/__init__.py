"""Cubes from many scenes: catalog tables, ``open_catalog`` and ``open_mfdataset``."""
