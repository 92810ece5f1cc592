"""One settings registry: ``rx.set_options(...)``, also a context manager.

Every tunable of rumi_xarray lives here, and nothing else reads the
environment. Environment variables give the starting values (so dask workers
started with them inherit them); :func:`set_options` changes them for the
process, or for a ``with`` block::

    rx.set_options(cache_bytes="256MiB")
    with rx.set_options(group_bytes="32MiB", progress=False):
        ds = xr.open_dataset("cube.rumi", engine="rumi", chunks={})

========================  =========================  ===============================
option                    environment variable       meaning
========================  =========================  ===============================
``cache_bytes``           ``RUMI_XARRAY_CACHE_BYTES``  decoded-tile cache of lazy reads;
                                                      ``None``: 5 % of RAM (64 MiB to
                                                      2 GiB), and in a dask worker at
                                                      most 10 % of its memory limit
``group_bytes``           ``RUMI_XARRAY_GROUP_BYTES``  decoded bytes of one read group
                                                      (the preferred dask chunk);
                                                      ``None``: dask's
                                                      ``array.chunk-size``
``verify``                ``RUMI_VERIFY``            librumi frame checksums (on)
``threads``               ``RUMI_NUM_THREADS``       librumi's thread pool; ``None``:
                                                      one per dask worker thread
``progress``              ``RUMI_XARRAY_PROGRESS``   progress bars: ``None`` shows them
                                                      in terminals and notebooks
``sidecar``               ``RUMI_XARRAY_SIDECAR``    read ``<file>.aux.json`` at open
``allowed_hrefs``         ``RUMI_XARRAY_ALLOWED_HREFS``  what hrefs of a remote catalog
                                                      may reach beyond the rules
                                                      (comma-separated entries)
========================  =========================  ===============================

Under threads: a ``with`` block's values hold in the context that entered it
(its thread, or its asyncio task: a :class:`contextvars.ContextVar`, as
xarray's and dask's contexts should), whatever blocks other threads enter and
leave meanwhile, and threads that entered no block (dask's pool threads
running the tasks of a ``.compute()`` inside the block) see the values of the
latest block still open. When the last block ends, the values from before the
blocks are back, whatever order the blocks of different threads ended in. A
call outside a ``with`` block changes the process's values.
``verify``, ``threads`` and ``cache_bytes`` hold one value per process
(librumi's settings and the one tile cache): a block changing one of them
while a block of another thread holds it raises
:class:`~rumi_xarray.errors.RumiSettingsError` instead of racing it.

``verify`` and ``threads`` are librumi process settings, fixed at the first
decoded frame of a process; changing them afterwards raises
:class:`~rumi_xarray.errors.RumiSettingsError`. ``threads`` is applied at
rumi_xarray's first read. ``verify`` is the one setting the import makes
(:func:`verify_from_import`): unless ``RUMI_VERIFY`` is set, importing
rumi_xarray (as xarray does when it lists its engines) sets ``RUMI_VERIFY=1``
in ``os.environ``, so librumi's verification starts on in this process, for
librumi's own ``rumi.read`` after the import too, and in the processes it
starts; if librumi is loaded already, its verification is turned on at once.
``set_options(verify=...)`` applies ``verify`` at once. When verification is
wanted but was fixed off before (a frame decoded before the import, such as a
direct ``rumi.read``), reads raise
:class:`~rumi_xarray.errors.RumiVerificationError` until ``verify=False``
accepts unverified reads. ``RUMI_VERIFY=0`` keeps librumi's default, off.
"""

from __future__ import annotations

import contextvars
import math
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any

from rumi_xarray.errors import RumiSettingsError, RumiSettingsValueError

__all__ = ["get_options", "set_options"]

_ENV = {
    "cache_bytes": "RUMI_XARRAY_CACHE_BYTES",
    "group_bytes": "RUMI_XARRAY_GROUP_BYTES",
    "verify": "RUMI_VERIFY",
    "threads": "RUMI_NUM_THREADS",
    "progress": "RUMI_XARRAY_PROGRESS",
    "sidecar": "RUMI_XARRAY_SIDECAR",
    "allowed_hrefs": "RUMI_XARRAY_ALLOWED_HREFS",
}
_DEFAULTS: dict[str, Any] = {
    "cache_bytes": None,
    "group_bytes": None,
    "verify": True,
    "threads": None,
    "progress": None,
    "sidecar": True,
    "allowed_hrefs": (),
}
_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")

#: Options with one value per process: librumi's settings and the one tile cache's size.
PROCESS = frozenset({"verify", "threads", "cache_bytes"})

_lock = threading.RLock()
#: The process's values (environment, then calls outside ``with`` blocks).
_values: dict[str, Any] | None = None


@dataclass(eq=False)
class _Change:
    """One ``set_options`` call's values, in force from the call until its block ends."""

    values: dict[str, Any]
    thread: int = field(default_factory=threading.get_ident)
    entered: bool = False


#: Every change in force, oldest first: what threads that entered no block see (the
#: latest change of each option). A block's change leaves when it ends, wherever it is.
_changes: list[_Change] = []
#: What the ``with`` blocks of this context (thread or asyncio task) set.
_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "rumi_xarray_options", default=MappingProxyType({}))
#: Options whose change must reach live state (cache size, librumi settings).
_hooks: dict[str, Callable[[Any], None]] = {}
#: Options applied to live state whenever they are set, changed or not (librumi's
#: ``verify``): called with the value and whether a ``with`` block restores it.
_appliers: dict[str, Callable[[Any, bool], None]] = {}


#: Byte units as dask spells them, case-insensitive: none, decimal (``kB``, ``k``)
#: and binary (``KiB``, ``Ki``), up to peta.
_UNITS = {"": 1, "b": 1} | {
    f"{prefix}{suffix}": base**power
    for power, prefix in enumerate("kmgtp", start=1)
    for base, suffixes in ((1000, ("", "b")), (1024, ("i", "ib")))
    for suffix in suffixes}


def parse_bytes(text: str) -> int:
    """Return the number of bytes ``text`` spells, read as ``dask.utils.parse_bytes`` reads it.

    ``"128MiB"``, ``"64 MB"``, ``"5.4kB"``, ``"1e6"``, ``"MiB"`` (one of
    them). Written here rather than borrowed from dask because the settings
    registry sits below everything that may import dask;
    ``tests/test_options.py`` compares the two on generated sizes.

    Parameters
    ----------
    text : str

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Not a number followed by a byte unit, or not finite.
    """
    compact = text.replace(" ", "")
    if not any(char.isdigit() for char in compact):
        compact = f"1{compact}"
    cut = len(compact)
    while cut > 0 and compact[cut - 1].isalpha():
        cut -= 1
    number, unit = compact[:cut], compact[cut:]
    try:
        count = float(number)
    except ValueError:
        raise ValueError(f"cannot read {number!r} as a number") from None
    multiplier = _UNITS.get(unit.lower())
    if multiplier is None:
        raise ValueError(f"cannot read {unit!r} as a byte unit")
    if not math.isfinite(count * multiplier):
        raise ValueError(f"{text!r} is not a finite size")
    return int(count * multiplier)


def _bytes(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = parse_bytes(value)
        except ValueError as exc:
            raise RumiSettingsValueError(
                f"option {name}: cannot read {value!r} as a size in bytes") from exc
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RumiSettingsValueError(
            f"option {name} must be a non-negative number of bytes, got {value!r}")
    return int(value)


def _flag(name: str, value: Any, none_ok: bool = False) -> bool | None:
    if value is None and none_ok:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        if none_ok and text in ("auto", ""):
            return None
    if isinstance(value, bool):
        return value
    raise RumiSettingsValueError(
        f"option {name} must be True or False{' or None' if none_ok else ''}, got {value!r}")


def _threads(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().upper() == "ALL_CPUS":
            return os.cpu_count() or 1
        try:
            value = int(value)
        except ValueError:
            raise RumiSettingsValueError(
                f"option {name} must be a whole number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise RumiSettingsValueError(
            f"option {name} must be an integer from 1 to 1024, got {value!r}")
    return int(value)


def _hrefs(name: str, value: Any) -> tuple[str, ...]:
    from rumi_xarray.sources.hrefs import parse_allowed

    if value is not None and not isinstance(value, str) and not hasattr(value, "__iter__"):
        raise RumiSettingsValueError(
            f"option {name} takes a list of hosts, schemes, networks or prefixes, got "
            f"{value!r}")
    try:
        return parse_allowed(value)
    except ValueError as exc:
        raise RumiSettingsValueError(f"option {name}: {exc}") from None


_VALIDATE: dict[str, Callable[[str, Any], Any]] = {
    "cache_bytes": _bytes,
    "group_bytes": lambda n, v: None if v is None else max(1, _bytes(n, v) or 1),
    "verify": _flag,
    "threads": _threads,
    "progress": lambda n, v: _flag(n, v, none_ok=True),
    "sidecar": _flag,
    "allowed_hrefs": _hrefs,
}


def _load() -> dict[str, Any]:
    """Return the live values, reading the environment the first time."""
    global _values
    with _lock:
        if _values is None:
            values = dict(_DEFAULTS)
            for name, variable in _ENV.items():
                text = os.environ.get(variable)
                if text is not None and text.strip():
                    try:
                        values[name] = _VALIDATE[name](variable, text)
                    except ValueError as exc:
                        # The validators name the variable in place of the option.
                        raise RumiSettingsValueError(
                            f"environment variable {str(exc).removeprefix('option ')}"
                        ) from None
            _values = values
        return _values


def _latest(name: str) -> Any:
    """Return the value of the latest change in force, or the process's (under ``_lock``)."""
    for change in reversed(_changes):
        if name in change.values:
            return change.values[name]
    return _load()[name]


def get_options() -> Mapping[str, Any]:
    """Return the current settings (those of this context's ``with`` blocks first).

    Returns
    -------
    dict
        A copy: option name -> value (``None`` where a default is computed
        when used, see :func:`set_options`).

    Examples
    --------
    >>> import rumi_xarray as rx
    >>> rx.get_options()["verify"]
    True
    >>> with rx.set_options(group_bytes=16 * 2**20):
    ...     rx.get_options()["group_bytes"]
    16777216
    """
    with _lock:
        return {name: option(name) for name in _DEFAULTS}


def option(name: str) -> Any:
    """Return one setting's current value.

    Parameters
    ----------
    name : str

    Returns
    -------
    object
    """
    if name not in PROCESS:
        mine = _context.get()
        if name in mine:
            return mine[name]
    with _lock:
        return _latest(name)


def from_environment(name: str) -> bool:
    """Return whether an option's value was given by its environment variable.

    Parameters
    ----------
    name : str

    Returns
    -------
    bool
    """
    text = os.environ.get(_ENV[name])
    return text is not None and bool(text.strip())


def on_change(name: str, hook: Callable[[Any], None]) -> None:
    """Register the function that applies a new value of ``name`` to live state.

    Parameters
    ----------
    name : str
    hook : callable
        Called with the new value; may raise to refuse it.
    """
    _hooks[name] = hook


def on_set(name: str, apply: Callable[[Any, bool], None]) -> None:
    """Register the function that applies ``name`` whenever :class:`set_options` sets it.

    Unlike :func:`on_change`, it runs even when the value does not change:
    ``set_options(verify=True)`` reaches librumi at once, so a direct
    ``rumi.read`` after it is verified too. The registry imports no module
    that applies settings; they register here (the package's ``__init__``
    registers ``verify``, whose module loads librumi only when it is set).

    Parameters
    ----------
    name : str
    apply : callable
        ``apply(value, restoring)``: called before the value is stored, where
        raising refuses it (``restoring`` False), and again with the previous
        value when a ``with`` block ends (``restoring`` True).
    """
    _appliers[name] = apply


def verify_from_import() -> None:
    """Turn librumi's checksum verification on, as ``import rumi_xarray`` does.

    The one process-wide setting the import makes. Unless the user chose
    (``RUMI_VERIFY`` set, ``0`` included), ``RUMI_VERIFY=1`` goes into
    ``os.environ``: librumi reads it when it first needs the setting, so
    loading librumi is left to the first read (the import stays light), and
    processes started from this one inherit it. If librumi is loaded already,
    it may have read its default (off), so the ``verify`` applier registered
    with :func:`on_set` turns it on at once; if a frame was decoded before
    (verification pinned off), that is not an error here: rumi_xarray's reads
    refuse and say why.

    Examples
    --------
    >>> import os
    >>> import rumi_xarray  # calls it
    >>> os.environ.get("RUMI_VERIFY")  # unless the user had set it
    '1'
    """
    variable = _ENV["verify"]
    if (os.environ.get(variable) or "").strip():
        return  # the user's choice, RUMI_VERIFY=0 included
    os.environ[variable] = "1"
    apply = _appliers.get("verify")
    if "rumi" in sys.modules and apply is not None and option("verify"):
        apply(True, True)  # not strict: a pinned-off librumi is reported by the reads


class set_options:  # noqa: N801  (named like xarray's set_options, used the same way)
    """Change rumi_xarray settings, for the process or within a ``with`` block.

    Parameters
    ----------
    cache_bytes : int or str, optional
        Capacity of the decoded-tile cache of lazy reads (``"256MiB"``); 0
        turns it off. ``None``: 5 % of RAM, between 64 MiB and 2 GiB, and in
        a dask worker at most 10 % of its memory limit.
    group_bytes : int or str, optional
        Decoded bytes of one read group: the size ``chunks={}`` gives a dask
        chunk (whole frames, grown along band, then time, then x and y).
        ``None``: dask's ``array.chunk-size``.
    verify : bool
        librumi's frame checksum verification (default on), applied to
        librumi at once. When it is on but librumi's is pinned off (a frame
        was decoded before, e.g. by a direct ``rumi.read``), reads raise
        :class:`~rumi_xarray.errors.RumiVerificationError`; ``False``
        accepts unverified reads.
    threads : int, optional
        librumi's thread pool size; ``None``: one per dask worker thread.
    progress : bool, optional
        Progress bars for long operations (``None``: in terminals and
        notebooks).
    sidecar : bool
        Read ``<file>.aux.json`` (nodata, scale, offset, units) when opening.
    allowed_hrefs : str or list of str
        Where the hrefs of a catalog read from a remote location may lead beyond
        the rules (no local files, no loopback, link-local or private addresses,
        only object-store and web schemes): ``"*"`` (anything), schemes
        (``"file:"``), hosts (``"127.0.0.1:8080"``), networks (``"10.0.0.0/8"``),
        URL prefixes (``"http://10.1.2.3/data/"``) or local path prefixes.
        Read when a catalog is opened; its dask tasks use the same list.

    Raises
    ------
    RumiSettingsValueError
        An unknown option or an invalid value (also a ``ValueError``).
    RumiSettingsError
        A librumi setting (``verify``, ``threads``) changed after librumi
        fixed it at the first read (``verify=True`` then raises its subclass
        :class:`~rumi_xarray.errors.RumiVerificationError`).

    Examples
    --------
    >>> import rumi_xarray as rx
    >>> with rx.set_options(group_bytes="32MiB"):
    ...     pass
    """

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(_DEFAULTS))
        if unknown:
            raise RumiSettingsValueError(
                f"set_options: unknown option(s) {unknown}; valid options: "
                f"{sorted(_DEFAULTS)}")
        checked = {name: _VALIDATE[name](name, value) for name, value in options.items()}
        self._token: contextvars.Token[Mapping[str, Any]] | None = None
        with _lock:
            here = threading.get_ident()
            for name in sorted(PROCESS & set(checked)):
                holder = next((c for c in _changes if c.entered and name in c.values
                               and c.thread != here), None)
                if holder is not None:
                    raise RumiSettingsError(
                        f"set_options({name}=...): a `with rx.set_options({name}=...)` block "
                        f"of another thread is open; {name} has one value per process, so "
                        f"blocks changing it cannot overlap across threads (set it once, "
                        f"outside the threads)")
            before = {name: _latest(name) for name in checked}
            for name, value in checked.items():
                if name in _appliers:
                    _appliers[name](value, False)
            self._change = _Change(dict(checked))
            _changes.append(self._change)
            try:
                _run_hooks(before)
            except Exception:
                _changes.remove(self._change)
                raise
        # A call never used as a `with` block changes the process's values when it is
        # dropped (at once, for a call on a line of its own).
        self._commit = weakref.finalize(self, _commit, self._change)

    def __enter__(self) -> set_options:
        with _lock:
            self._commit.detach()
            self._change.entered = True
        mine = {k: v for k, v in self._change.values.items() if k not in PROCESS}
        self._token = _context.set(MappingProxyType({**_context.get(), **mine}))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with _lock:
            before = {name: _latest(name) for name in self._change.values}
            if self._change in _changes:
                _changes.remove(self._change)
            _run_hooks(before)
            for name in self._change.values:
                if name in _appliers:
                    _appliers[name](_latest(name), True)
        if self._token is not None:
            try:
                _context.reset(self._token)
            except ValueError:  # ended in another context than it began: undo its values
                left = {k: v for k, v in _context.get().items()
                        if k not in self._change.values}
                _context.set(MappingProxyType(left))


def _run_hooks(before: Mapping[str, Any]) -> None:
    """Apply the options whose latest value changed to live state (under ``_lock``)."""
    for name, old in before.items():
        new = _latest(name)
        hook = _hooks.get(name)
        if hook is not None and new != old:
            hook(new)


def _commit(change: _Change) -> None:
    """Make a call not used as a ``with`` block the process's values."""
    with _lock:
        if change.entered or change not in _changes:
            return
        at = _changes.index(change)
        _load().update(change.values)
        # Older changes of the same options no longer show: this one came later.
        for older in _changes[:at]:
            for name in change.values:
                older.values.pop(name, None)
        _changes.remove(change)
    # Inside a block of this context, the call wins for the rest of the block too.
    mine = _context.get()
    if any(name in mine for name in change.values):
        _context.set(MappingProxyType(
            {**mine, **{k: v for k, v in change.values.items() if k in mine}}))
