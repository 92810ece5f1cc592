"""Profile one ``read_many`` across many remote sources: the request timeline (issue 22).

Serves the chip benchmark's scenes (``benchmarks/chips.py`` writes them) through the
test suite's loopback range server with ``--latency-ms`` per request, and records when
each request arrives and is answered, its byte range and its source. Then reads one
batch of random chips with one ``rumi.read_many`` (and, for comparison, per-chip
``rumi.read`` calls in sequence) and prints:

- requests, bytes and distinct connections;
- how many requests were in flight at once (the transport's effective concurrency);
- the *waves*: groups of requests that arrive together after the previous group was
  answered, i.e. round trips the call paid in sequence;
- per source, how many requests and how their ranges were shaped.

Each configuration runs in a fresh process (Karu reads ``KARU_*`` once)::

    python benchmarks/karu_profile.py --data bench-data/chips-32x1024-t256
    python benchmarks/karu_profile.py --data ... --env KARU_CONCURRENCY=64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# The chip benchmark's workload options (this script profiles that workload).
from chips import add_workload_arguments

REPO = Path(__file__).resolve().parent.parent


def _child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests"))
    import numpy as np
    import rumi
    import servers

    log: list[dict[str, Any]] = []
    lock = threading.Lock()
    original = servers._RangeHandler.do_GET

    def timed(self: Any) -> None:
        start = time.perf_counter()
        original(self)
        with lock:
            log.append({"t0": start, "t1": time.perf_counter(), "path": self.path,
                        "range": self.headers.get("Range"), "conn": id(self.connection)})

    servers._RangeHandler.do_GET = timed
    servers._RangeHandler.disable_nagle_algorithm = True
    if args.backlog:
        # socketserver listens with a backlog of 5: a burst of new connections beyond it
        # has its SYNs dropped and retried by the client's TCP after 1 s (initial RTO).
        servers._OwnedHTTPServer.request_queue_size = args.backlog
    files = sorted(Path(args.data).glob("*.rumi"))[:args.scenes]
    server = servers.RangeHTTPServer(args.data, delay=args.latency_ms / 1000).start()
    try:
        urls = [server.url(f.name) for f in files]
        headers = [rumi.info(source=str(f)).header for f in files]
        size = rumi.info(source=str(files[0])).shape[-1]
        rng = np.random.default_rng(args.seed)
        n, chip = args.batch, args.chip
        scene = rng.integers(0, len(files), n)
        rows = rng.integers(0, size - chip + 1, n)
        cols = rng.integers(0, size - chip + 1, n)
        out: dict[str, Any] = {"env": {k: v for k, v in os.environ.items()
                                       if k.startswith("KARU_")}}
        modes = {"read_many": None, "read per chip": None}
        for mode in modes:
            log.clear()
            started = time.perf_counter()
            if mode == "read_many":
                for j in range(0, n, args.per_call):
                    sl = slice(j, j + args.per_call)
                    rumi.read_many([urls[s] for s in scene[sl]], [headers[s] for s in scene[sl]],
                                   windows=[(int(r), int(c), chip, chip)
                                            for r, c in zip(rows[sl], cols[sl], strict=True)],
                                   pattern="n t b y x")
            else:
                for s, r, c in zip(scene, rows, cols, strict=True):
                    rumi.read(urls[s], headers[s], window=(int(r), int(c), chip, chip),
                              pattern="t b y x")
            elapsed = time.perf_counter() - started
            out[mode] = summarize(sorted(log, key=lambda e: e["t0"]), started, elapsed)
        print(json.dumps(out))
    finally:
        server.stop()


def summarize(log: list[dict[str, Any]], started: float, elapsed: float) -> dict[str, Any]:
    """Return requests, in-flight concurrency, waves and per-source range shapes."""
    events = sorted([(e["t0"], 1) for e in log] + [(e["t1"], -1) for e in log])
    inflight = peak = 0
    for _, step in events:
        inflight += step
        peak = max(peak, inflight)
    # A wave starts with a request that arrives after every earlier one was answered.
    waves: list[list[dict[str, Any]]] = []
    answered = -1.0
    for e in log:
        if not waves or e["t0"] > answered:
            waves.append([])
        waves[-1].append(e)
        answered = max(answered, e["t1"])
    per_source: dict[str, list[int]] = {}
    for e in log:
        rng = e["range"] or ""
        length = 0
        if rng.startswith("bytes=") and "-" in rng and "," not in rng:
            a, _, b = rng[6:].partition("-")
            length = int(b) - int(a) + 1 if a and b else 0
        per_source.setdefault(e["path"], []).append(length)
    return {"seconds": round(elapsed, 3), "requests": len(log),
            "connections": len({e["conn"] for e in log}), "peak_in_flight": peak,
            "waves": len(waves), "wave_sizes": [len(w) for w in waves],
            "wave_starts_ms": [round((w[0]["t0"] - started) * 1000) for w in waves],
            "wave_ends_ms": [round((max(e["t1"] for e in w) - started) * 1000) for w in waves],
            "first_request_ms": round((log[0]["t0"] - started) * 1000) if log else None,
            "requests_per_source": sorted(len(v) for v in per_source.values()),
            "range_kib": sorted(round(x / 1024) for v in per_source.values() for x in v)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of the chip benchmark's scenes")
    add_workload_arguments(parser)
    parser.add_argument("--per-call", type=int, default=64, help="chips per read_many call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backlog", type=int, default=0,
                        help="listen backlog of the server (0: tests/servers.py's; 5 is "
                             "socketserver's default, which stalls bursts of connections 1 s)")
    parser.add_argument("--env", action="append", default=[], help="KARU_X=value, repeatable")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return 0
    env = dict(os.environ)
    env.update(dict(item.split("=", 1) for item in args.env))
    argv = [a for a in sys.argv[1:] if a]
    proc = subprocess.run([sys.executable, __file__, *argv, "--child"], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for mode in ("read_many", "read per chip"):
        r = result[mode]
        print(f"{mode:14s} {r['seconds']:6.3f} s  {r['requests']:4d} requests  "
              f"{r['connections']:3d} connections  peak in flight {r['peak_in_flight']:3d}  "
              f"{r['waves']:3d} waves  first request at {r['first_request_ms']} ms  "
              f"{sum(r['range_kib']) / 1024:.1f} MiB fetched")
        print(f"{'':14s} wave sizes {r['wave_sizes'][:20]}  starts (ms) "
              f"{r['wave_starts_ms'][:20]}")
        print(f"{'':14s} wave ends (ms) {r['wave_ends_ms'][:20]}")
        print(f"{'':14s} requests per source {r['requests_per_source']}")
        print(f"{'':14s} range sizes (KiB) {r['range_kib'][:12]} ... {r['range_kib'][-6:]}")
    print(json.dumps(result["env"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
