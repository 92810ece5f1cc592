"""What to read, and how: grid geometry, scenes and cubes, native calls, selections.

Pure Python: nothing here does I/O or imports librumi or dask.

Glossary (the words the read path's docstrings use, each for one thing):

frame
    One independently compressed OpenZL unit of a file: a tile plane (one
    band, one time step) or a tile with every axis longer than 1 (the
    file's frame layout). Decoding is frame by frame.
cell
    One tile of the frame grid (``tile_height x tile_width``, clipped at the
    edges): every frame lies in exactly one cell.
window
    Rows x columns ``(row, col, height, width)`` of one scene's image.
block
    Time steps x bands x one window (:class:`~rumi_xarray.model.planning.Block`);
    a *request* is a block of the cube to produce.
cell window
    A window inside one cell of one scene, with its time steps and bands
    (:class:`~rumi_xarray.model.cells.CellWindow`): how scattered pixels are read.
call
    One native read: ``rumi_read`` or ``rumi_read_many``, equal windows of one
    or more scenes with shared time steps and bands
    (:class:`~rumi_xarray.model.planning.Call`). Each scene + window of a call
    is one of its *items*.
assembly
    The calls that produce a list of requests and, per request, the parts of
    their results that fill its block (:class:`~rumi_xarray.model.planning.Assembly`).
    A *chip batch* (:class:`~rumi_xarray.model.chips.ChipBatch`) is the same
    for a batch of chips.
route
    How one lazily indexed selection is read now: a window in one call, the
    cells it touches, the tile cache (:mod:`rumi_xarray.backend.route`).
read group
    The chunk of whole frames one dask task reads with one call
    (``encoding["preferred_chunks"]``); chunks that tile part of one read
    group are read together.
plan
    librumi's own word only: its byte-range plan of a call (frames, offsets,
    lengths; ``plan_ranges``, no I/O). A STAC *load plan*
    (:mod:`rumi_xarray.stac.plan`) says what each output chunk of a STAC load
    reads.
source group
    STAC loads: the Items of one output chunk that share a frame layout, read
    by one ``read_many`` call (:mod:`rumi_xarray.stac.plan`).
"""
