"""``python -m rumi_xarray``: the ``rumi-xarray`` command."""

from rumi_xarray.cli import main

raise SystemExit(main())
