"""Human-readable numbers for reports (``explain()``, the command line, the demo)."""

from __future__ import annotations


def human_size(n: float | None) -> str:
    """Return a byte count in binary units (``"12.3 MiB"``).

    Parameters
    ----------
    n : float or None

    Returns
    -------
    str
        ``"unknown"`` for None.
    """
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
