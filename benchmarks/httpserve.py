"""Loopback range-capable HTTP server for the benchmark, run in a child process.

The server is ``tests/servers.py``'s :class:`RangeHTTPServer` (the test suite's
real HTTP/1.1 server with byte ranges and a request log). It runs in its own
process, not a thread of the benchmark: in-process, its Python request
handling would compete for the GIL with exactly the Python-heavy readers we
measure (fsspec, zarr, dask), and pure-native readers would be favoured. The
child also turns on TCP_NODELAY, as real object stores do (see ``_serve``).

``latency_ms`` (``--latency-ms`` when run as a script) makes the child sleep
that long before answering each request, in the handler thread of that
request: concurrent requests wait concurrently, as they do against an object
store tens of milliseconds away, and a reader pays the latency once per
request it makes (in sequence), which is what the request counts predict.

The parent talks to the child over its stdin/stdout, one line per command:
``reset`` clears the request log, ``stats`` answers with one JSON line
(requests, bytes, connections), ``quit`` stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class ServerProcess:
    """Parent-side handle on the child server: start, reset, count, stop.

    Parameters
    ----------
    root : Path
        Folder to serve (the benchmark data folder).
    latency_ms : float, default 0
        Sleep before answering each request, in milliseconds.
    """

    def __init__(self, root: Path, latency_ms: float = 0.0) -> None:
        self.root = root
        self.latency_ms = float(latency_ms)
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> ServerProcess:
        self._proc = subprocess.Popen(
            [sys.executable, "-u", __file__, str(self.root),
             "--latency-ms", str(self.latency_ms)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        self.base_url = self._ask("url")["url"]
        return self

    def _ask(self, command: str) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("server not started")
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark HTTP server exited (code {proc.poll()})")
        return json.loads(line)

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"

    def reset(self) -> None:
        self._ask("reset")

    def stats(self) -> dict[str, int]:
        return self._ask("stats")

    def stop(self) -> None:
        if self._proc is None:
            return
        with contextlib.suppress(RuntimeError, BrokenPipeError, OSError):
            self._ask("quit")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()  # only our own child, by handle
            self._proc.wait()
        self._proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _serve(root: str, latency_ms: float = 0.0) -> None:
    """Child side: run RangeHTTPServer and answer commands until ``quit`` or EOF."""
    sys.path.insert(0, str(REPO / "tests"))
    import servers  # the test suite's server; see module docstring

    # Real object stores and CDNs answer with TCP_NODELAY. The stdlib handler
    # does not: it writes headers and body in separate segments, and Nagle plus
    # the client's delayed ACK then stall a small response ~40 ms. That stall
    # hits every small ranged request (librumi's per-chunk reads: 10 ms -> 40 ms
    # each) and would turn request latency into a measurement of the kernel.
    servers._RangeHandler.disable_nagle_algorithm = True
    # A client that drops a pooled keep-alive connection is normal, not an error worth a
    # traceback on the benchmark's terminal (socketserver prints one per reset).
    servers._OwnedHTTPServer.handle_error = lambda self, request, client_address: None
    # RUMI_BENCH_BACKLOG=5 restores socketserver's listen backlog, which stalled bursts of
    # new connections by TCP's 1 s retry (issue 22), to measure what that cost.
    backlog = os.environ.get("RUMI_BENCH_BACKLOG")
    if backlog:
        servers._OwnedHTTPServer.request_queue_size = int(backlog)
    server = servers.RangeHTTPServer(root, delay=latency_ms / 1000).start()
    try:
        for line in sys.stdin:
            command = line.strip()
            if command == "url":
                answer: dict[str, Any] = {"url": server.base_url}
            elif command == "reset":
                server.reset()
                answer = {}
            elif command == "stats":
                reqs = server.requests()
                answer = {"requests": len(reqs),
                          "gets": sum(r.method == "GET" for r in reqs),
                          "errors": sum(r.status >= 400 for r in reqs),
                          "bytes": server.bytes_served, "connections": server.connections}
            elif command == "quit":
                print("{}", flush=True)
                break
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="loopback range HTTP server (child side)")
    parser.add_argument("root")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="sleep before answering each request (milliseconds)")
    args = parser.parse_args()
    _serve(args.root, args.latency_ms)
