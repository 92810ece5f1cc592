"""The only code that talks to librumi (``rumi``) and geozl.

:mod:`~rumi_xarray.native.reads` reads (metadata, windows into numpy buffers,
byte plans), :mod:`~rumi_xarray.native.frames` and
:mod:`~rumi_xarray.native.files` write, :mod:`~rumi_xarray.native.binding`
binds the C functions rumi's Python API lacks, :mod:`~rumi_xarray.native.process`
applies librumi's process-wide settings at the first read and
:mod:`~rumi_xarray.native.stats` counts what was read.
"""
