"""``python -m rumi_xarray``: the ``rumi-xarray`` command."""

from rumi_xarray.cli.main import main

raise SystemExit(main())
