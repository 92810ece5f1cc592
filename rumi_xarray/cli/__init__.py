"""The ``rumi-xarray`` command: one module per subcommand."""
