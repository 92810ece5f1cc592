"""Tables, bar verdicts and the markdown summary of a benchmark run.

Ratio conventions, used everywhere: ``x engine`` is throughput relative to the
engine limit (engine time / reader time, so 0.9 means "90 % of rumi.read");
``vs zarr`` and ``vs tiff`` are speed-ups over that peer (peer time / reader
time, so > 1 means faster than the peer).
"""

from __future__ import annotations

import math
from typing import Any

WHERE = ("local", "http")
WORKLOADS = ("full", "mean", "pixels", "chips")
TITLES = {"full": "W1 full load", "mean": "W2 time mean", "pixels": "W3 pixel series",
          "chips": "W4 chips"}
RX = ("rx-lazy", "rx-grouped", "rx-ungrouped", "rx-grouped-auto")
PEERS = ("zarr", "geotiff")
#: W1 grouped dask must reach this fraction of the engine's throughput.
ENGINE_BAR = 0.9


def _index(results: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["where"], r["workload"], r["reader"]): r for r in results}


def _median(row: dict[str, Any] | None) -> float:
    if row is None or not row.get("ok") or "median" not in row:
        return math.nan
    return float(row["median"])


def _ratio(num: float, den: float) -> float:
    return num / den if den and not math.isnan(num) and not math.isnan(den) else math.nan


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if math.isnan(x) else f"{x:.{digits}f}"


def text_tables(results: list[dict[str, Any]]) -> str:
    """Return one fixed-width table per (where, workload)."""
    idx = _index(results)
    lines = []
    for where in WHERE:
        for w in WORKLOADS:
            rows = [r for r in results if r["where"] == where and r["workload"] == w]
            if not rows:
                continue
            eng = _median(idx.get((where, w, "engine")))
            peers = {p: _median(idx.get((where, w, p))) for p in PEERS}
            lines.append(f"{where.upper()} {TITLES[w]}  (median s of {len(rows[0]['times'])}; "
                         f"x engine = throughput vs rumi.read; vs = speed-up over peer)")
            head = (f"  {'reader':28s} {'median':>7s} {'min':>7s} {'cpu':>6s} "
                    f"{'x engine':>8s} {'vs zarr':>7s} {'vs tiff':>7s} {'calls':>5s}")
            if where == "http":
                head += f" {'requests':>8s} {'MiB':>7s}"
            lines.append(head)
            for r in rows:
                m = _median(r)
                line = (f"  {r['label']:28s} {_fmt(m, 3):>7s} "
                        f"{_fmt(r.get('min', math.nan), 3):>7s} "
                        f"{_fmt(r.get('cpu_median', math.nan), 2):>6s} "
                        f"{_fmt(_ratio(eng, m)):>8s} {_fmt(_ratio(peers['zarr'], m)):>7s} "
                        f"{_fmt(_ratio(peers['geotiff'], m)):>7s} "
                        f"{_calls(r):>5s}")
                if where == "http":
                    req = r.get("requests_median")
                    mib = r.get("bytes_median")
                    line += (f" {'-' if req is None else req:>8} "
                             f"{'-' if mib is None else f'{mib / 2**20:.1f}':>7}")
                if not r["ok"]:
                    line += f"  !! {r['error']}"
                lines.append(line)
            lines.append("")
    return "\n".join(lines)


def _calls(row: dict[str, Any]) -> str:
    calls = row.get("native_calls") or []
    if row["reader"] in ("engine", "naive", "zarr", "geotiff") or not calls:
        return "-"
    return str(int(sorted(calls)[len(calls) // 2]))


def bar_verdicts(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check the issue-7 performance bar; one entry per criterion."""
    idx = _index(results)
    out: list[dict[str, Any]] = []
    eng = _median(idx.get(("local", "full", "engine")))
    grouped = _median(idx.get(("local", "full", "rx-grouped")))
    if not math.isnan(eng) and not math.isnan(grouped):
        ratio = eng / grouped
        out.append({"criterion": f"local W1 dask grouped >= {ENGINE_BAR:.1f}x engine throughput",
                    "value": round(ratio, 3), "met": ratio >= ENGINE_BAR})
    for where in WHERE:
        for w in WORKLOADS:
            g = _median(idx.get((where, w, "rx-grouped")))
            rx_best = min((( _median(idx.get((where, w, k))), k) for k in RX),
                          key=lambda t: math.inf if math.isnan(t[0]) else t[0])
            for peer in PEERS:
                p = _median(idx.get((where, w, peer)))
                if math.isnan(p):
                    continue
                if not math.isnan(g):
                    out.append({"criterion": f"{where} {TITLES[w]}: dask grouped faster than "
                                             f"{peer}", "value": round(p / g, 3),
                                "met": g < p})
                if not math.isnan(rx_best[0]) and rx_best[1] != "rx-grouped":
                    out.append({"criterion": f"{where} {TITLES[w]}: best rumi_xarray path "
                                             f"({rx_best[1]}) faster than {peer}",
                                "value": round(p / rx_best[0], 3), "met": rx_best[0] < p})
        if where == "http":
            for w in WORKLOADS:
                g_row = idx.get((where, w, "rx-grouped"))
                if g_row is None or g_row.get("requests_median") is None:
                    continue
                for peer in PEERS:
                    p_row = idx.get((where, w, peer))
                    if p_row is None or p_row.get("requests_median") is None:
                        continue
                    gr, pr = g_row["requests_median"], p_row["requests_median"]
                    out.append({"criterion": f"http {TITLES[w]}: dask grouped fewer requests "
                                             f"than {peer} ({gr} vs {pr})",
                                "value": gr, "met": gr < pr})
    return out


def format_verdicts(verdicts: list[dict[str, Any]]) -> str:
    lines = ["Performance bar (issue 7):"]
    for v in verdicts:
        mark = "MET " if v["met"] else "MISS"
        lines.append(f"  [{mark}] {v['criterion']}: {v['value']}")
    missed = sum(not v["met"] for v in verdicts)
    lines.append(f"  {len(verdicts) - missed} met, {missed} missed")
    return "\n".join(lines)


def markdown(results: list[dict[str, Any]], meta: dict[str, Any],
             verdicts: list[dict[str, Any]], command: str) -> str:
    """Return the README-includable summary: one matrix per location, then verdicts."""
    idx = _index(results)
    spec = meta["spec"]
    sizes = meta["sizes"]
    raw = sizes["raw"]
    out = [
        f"<!-- generated by `{command}`; do not edit -->",
        f"Cube: T={spec['times']}, B={spec['bands']}, {spec['size']}x{spec['size']} uint16 "
        f"({raw / 2**20:.0f} MiB), tile {spec['tile']}. Rumi codec `{meta['codec']}` "
        f"({sizes['rumi'] / 2**20:.0f} MiB), Zarr v3 zstd ({sizes['zarr'] / 2**20:.0f} MiB), "
        f"GeoTIFF ZSTD+predictor ({sizes['geotiff'] / 2**20:.0f} MiB). "
        f"{meta['threads']} threads everywhere, {meta['cpus']} CPUs, median of "
        f"{meta['reps']} interleaved runs after {meta['warmup']} warm-up; W3 = "
        f"{meta['pixels']} pixels, W4 = {meta['chips']} chips of {meta['chip_size']}^2.",
        "",
        "Median seconds. For the Rumi readers, in brackets: speed-up over Zarr / GeoTIFF "
        "(> 1 = faster). Over HTTP: requests per run (open included).",
        "",
    ]
    for where in WHERE:
        present = [w for w in WORKLOADS if any(k[0] == where and k[1] == w for k in idx)]
        if not present:
            continue
        out.append(f"**{'Local files' if where == 'local' else 'Loopback HTTP (W5)'}**")
        out.append("")
        out.append("| reader | " + " | ".join(TITLES[w] for w in present) + " |")
        out.append("|---|" + "---:|" * len(present))
        labels: dict[str, str] = {}
        for r in results:
            if r["where"] == where:
                labels.setdefault(r["reader"], r["label"])
        for key, label in labels.items():
            cells = []
            for w in present:
                row = idx.get((where, w, key))
                m = _median(row)
                if math.isnan(m):
                    cells.append("—" if row is None else "error")
                    continue
                cell = f"{m:.3f}"
                if key not in PEERS and key != "engine":
                    z = _ratio(_median(idx.get((where, w, "zarr"))), m)
                    t = _ratio(_median(idx.get((where, w, "geotiff"))), m)
                    cell += f" ({_fmt(z)} / {_fmt(t)})"
                if where == "http" and row and row.get("requests_median") is not None:
                    cell += f", {row['requests_median']} req"
                cells.append(cell)
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("**Bar**")
    out.append("")
    for v in verdicts:
        out.append(f"- {'✅' if v['met'] else '❌'} {v['criterion']}: {v['value']}")
    out.append("")
    return "\n".join(out)
