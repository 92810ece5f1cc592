"""Tables, bar verdicts and the markdown summary of a benchmark run.

Ratio conventions, used everywhere: ``x engine`` is throughput relative to the
engine limit (engine time / reader time, so 0.9 means "90 % of rumi.read");
``vs zarr`` and ``vs tiff`` are speed-ups over that peer (peer time / reader
time, so > 1 means faster than the peer).
"""

from __future__ import annotations

import math
from typing import Any

WORKLOADS = ("full", "mean", "pixels", "chips", "chain")
TITLES = {"full": "W1 full load", "mean": "W2 time mean", "pixels": "W3 pixel series",
          "chips": "W4 chips", "chain": "W6 chained-selection chip"}
#: Issue 20: the chained forms of W6 fetch at most this many times the bytes of one isel.
CHAIN_BYTES_BAR = 1.5
CHAINS = ("xr-chain-sel", "xr-chain-isel")
#: Issue 20: tile-sized chunks against chunks={} over a latency server: time at most
#: TILES_TIME_BAR x, requests at most TILES_REQUEST_FACTOR x those of chunks={} beyond the
#: open, plus the open's own (OPEN_REQUESTS: two metadata ranges and the sidecar GET).
TILES_TIME_BAR, TILES_REQUEST_FACTOR, OPEN_REQUESTS = 1.5, 2, 3
RX = ("rx-lazy", "xr-chunks", "xr-auto", "rx-chunks", "rx-auto", "rx-catalog")
#: The dask-backed paths every bar of issue 11 applies to.
DASK_PATHS = ("xr-chunks", "xr-auto", "rx-chunks", "rx-auto", "rx-catalog")
#: The reader the peer comparisons of issue 7 use (the default dask path).
MAIN = "xr-chunks"
PEERS = ("zarr", "geotiff")
#: W1 full load through every dask path: at least this fraction of the engine's throughput.
ENGINE_BAR = 0.9
#: Over a latency server, W1 and W2 through every dask path: at most this many times the
#: engine's time, and at most REQUEST_FACTOR x its requests + REQUEST_SLACK.
LATENCY_TIME_BAR = 1.5
REQUEST_FACTOR, REQUEST_SLACK = 2, 4


def _reference(idx: dict[tuple[str, str, str], dict[str, Any]], where: str, workload: str,
               key: str) -> str:
    """Return the engine reader a dask path is held to.

    The catalog of single-date files is held to one ``rumi.read_many`` of those files
    (when measured): no read of many files can make fewer requests than one per file.
    """
    if key == "rx-catalog" and (where, workload, "engine-scenes") in idx:
        return "engine-scenes"
    return "engine"


def wheres(results: list[dict[str, Any]]) -> list[str]:
    """Return the locations measured (``local``, ``http``, ``http+20ms``...), in run order."""
    return list(dict.fromkeys(r["where"] for r in results))


def _index(results: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["where"], r["workload"], r["reader"]): r for r in results}


def _median(row: dict[str, Any] | None) -> float:
    if row is None or not row.get("ok") or "median" not in row:
        return math.nan
    return float(row["median"])


def _min(row: dict[str, Any] | None) -> float:
    if row is None or not row.get("ok") or "min" not in row:
        return math.nan
    return float(row["min"])


def _ratio(num: float, den: float) -> float:
    return num / den if den and not math.isnan(num) and not math.isnan(den) else math.nan


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if math.isnan(x) else f"{x:.{digits}f}"


def text_tables(results: list[dict[str, Any]]) -> str:
    """Return one fixed-width table per (where, workload)."""
    idx = _index(results)
    lines = []
    for where in wheres(results):
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
            if where.startswith("http"):
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
                if where.startswith("http"):
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
    if row["reader"] in ("engine", "engine-scenes", "naive", "zarr", "geotiff") or not calls:
        return "-"
    return str(int(sorted(calls)[len(calls) // 2]))


def bar_verdicts(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check the performance bars of issues 11 and 7; one entry per criterion.

    Issue 11: W1 through every dask path >= 0.9x the engine's throughput
    (locally); over a latency server, W1 and W2 through every dask path <= 1.5x
    the engine's time and <= 2x its requests + 4. Judged on medians; the ratio
    of the minimums is given beside it (less sensitive to other processes).
    Issue 7: the default dask path (and the best rumi_xarray path) faster than
    Zarr and GeoTIFF, with fewer requests over HTTP.
    """
    idx = _index(results)
    out: list[dict[str, Any]] = []
    for key in DASK_PATHS:
        ref = _reference(idx, "local", "full", key)
        eng = _median(idx.get(("local", "full", ref)))
        eng_min = _min(idx.get(("local", "full", ref)))
        m = _median(idx.get(("local", "full", key)))
        if not math.isnan(eng) and not math.isnan(m):
            out.append({"criterion": f"local W1 {key} >= {ENGINE_BAR:.1f}x {ref} throughput",
                        "value": round(eng / m, 3), "met": eng / m >= ENGINE_BAR,
                        "of_minimums": round(_ratio(eng_min, _min(idx.get(
                            ("local", "full", key)))), 3)})
    for where in wheres(results):
        if not where.startswith("http+"):
            continue
        for w in ("full", "mean"):
            for key in DASK_PATHS:
                ref = _reference(idx, where, w, key)
                e_row = idx.get((where, w, ref))
                e = _median(e_row)
                e_req = e_row.get("requests_median") if e_row else None
                row = idx.get((where, w, key))
                m = _median(row)
                if math.isnan(m) or math.isnan(e):
                    continue
                out.append({"criterion": f"{where} {TITLES[w]} {key} <= "
                                         f"{LATENCY_TIME_BAR}x {ref} time",
                            "value": round(m / e, 3), "met": m / e <= LATENCY_TIME_BAR,
                            "of_minimums": round(_ratio(_min(row), _min(e_row)), 3)})
                req = row.get("requests_median") if row else None
                if req is not None and e_req is not None:
                    limit = REQUEST_FACTOR * e_req + REQUEST_SLACK
                    out.append({"criterion": f"{where} {TITLES[w]} {key} requests <= "
                                             f"{REQUEST_FACTOR}x {ref} + {REQUEST_SLACK} "
                                             f"({req} vs {e_req})",
                                "value": req, "met": req <= limit})
    out += _tile_chunk_verdicts(idx, results)
    for where in wheres(results):
        for w in WORKLOADS:
            g = _median(idx.get((where, w, MAIN)))
            rx_best = min(((_median(idx.get((where, w, k))), k) for k in RX),
                          key=lambda t: math.inf if math.isnan(t[0]) else t[0])
            for peer in PEERS:
                p = _median(idx.get((where, w, peer)))
                if math.isnan(p):
                    continue
                if not math.isnan(g):
                    out.append({"criterion": f"{where} {TITLES[w]}: {MAIN} faster than "
                                             f"{peer}", "value": round(p / g, 3),
                                "met": g < p})
                if not math.isnan(rx_best[0]) and rx_best[1] != MAIN:
                    out.append({"criterion": f"{where} {TITLES[w]}: best rumi_xarray path "
                                             f"({rx_best[1]}) faster than {peer}",
                                "value": round(p / rx_best[0], 3), "met": rx_best[0] < p})
            g_row = idx.get((where, w, MAIN))
            if not where.startswith("http") or g_row is None or \
                    g_row.get("requests_median") is None:
                continue
            for peer in PEERS:
                p_row = idx.get((where, w, peer))
                if p_row is None or p_row.get("requests_median") is None:
                    continue
                gr, pr = g_row["requests_median"], p_row["requests_median"]
                out.append({"criterion": f"{where} {TITLES[w]}: {MAIN} fewer requests "
                                         f"than {peer} ({gr} vs {pr})",
                            "value": gr, "met": gr < pr})
    return out


def _tile_chunk_verdicts(idx: dict[tuple[str, str, str], dict[str, Any]],
                      results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chained selections and tile-sized chunks against their one-isel / chunks={} twins."""
    out: list[dict[str, Any]] = []
    for where in wheres(results):
        if not where.startswith("http"):
            continue
        one = idx.get((where, "chain", MAIN))
        for key in CHAINS:
            row = idx.get((where, "chain", key))
            if one is None or row is None or row.get("bytes_median") is None or \
                    not one.get("bytes_median"):
                continue
            ratio = row["bytes_median"] / one["bytes_median"]
            out.append({"criterion": f"{where} W6 {key} bytes <= {CHAIN_BYTES_BAR}x one isel "
                                     f"({row['bytes_median']} vs {one['bytes_median']})",
                        "value": round(ratio, 3), "met": ratio <= CHAIN_BYTES_BAR})
        for w in ("full", "mean"):
            base, row = idx.get((where, w, MAIN)), idx.get((where, w, "xr-tiles"))
            if base is None or row is None or row.get("requests_median") is None:
                continue
            req, base_req = row["requests_median"], base["requests_median"]
            limit = TILES_REQUEST_FACTOR * (base_req - OPEN_REQUESTS) + OPEN_REQUESTS
            out.append({"criterion": f"{where} {TITLES[w]} xr-tiles requests <= "
                                     f"{TILES_REQUEST_FACTOR}x chunks={{}}'s beyond the open "
                                     f"({req} vs {base_req})", "value": req,
                        "met": req <= limit})
            if where.startswith("http+"):
                m, b = _median(row), _median(base)
                if not math.isnan(m) and not math.isnan(b):
                    out.append({"criterion": f"{where} {TITLES[w]} xr-tiles <= "
                                             f"{TILES_TIME_BAR}x chunks={{}} time",
                                "value": round(m / b, 3), "met": m / b <= TILES_TIME_BAR,
                                "of_minimums": round(_ratio(_min(row), _min(base)), 3)})
    return out


def format_verdicts(verdicts: list[dict[str, Any]]) -> str:
    """Return the verdicts as text, one line each, and a count."""
    lines = ["Performance bars (issues 11, 7 and 20):"]
    for v in verdicts:
        mark = "MET " if v["met"] else "MISS"
        extra = f" (ratio of minimums {v['of_minimums']})" if "of_minimums" in v else ""
        lines.append(f"  [{mark}] {v['criterion']}: {v['value']}{extra}")
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
        f"Measured code: {meta.get('rumi_xarray_source', {})}.",
        "",
    ]
    for where in wheres(results):
        present = [w for w in WORKLOADS if any(k[0] == where and k[1] == w for k in idx)]
        if not present:
            continue
        title = {"local": "Local files", "http": "Loopback HTTP (W5)"}.get(
            where, f"Loopback HTTP, {where.removeprefix('http+')} latency per request")
        out.append(f"**{title}**")
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
                if key not in PEERS and not key.startswith("engine"):
                    z = _ratio(_median(idx.get((where, w, "zarr"))), m)
                    t = _ratio(_median(idx.get((where, w, "geotiff"))), m)
                    cell += f" ({_fmt(z)} / {_fmt(t)})"
                if where.startswith("http") and row and row.get("requests_median") is not None:
                    cell += f", {row['requests_median']} req"
                cells.append(cell)
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("**Bar**")
    out.append("")
    for v in verdicts:
        extra = f" (ratio of minimums {v['of_minimums']})" if "of_minimums" in v else ""
        out.append(f"- {'✅' if v['met'] else '❌'} {v['criterion']}: {v['value']}{extra}")
    out.append("")
    return "\n".join(out)
