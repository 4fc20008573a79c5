"""A real HTTP server on loopback that counts connections, for the artifact tests (R7.1-R7.5)."""

from __future__ import annotations

import http.server
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Stats:
    """What the server saw: connections in total, the most requests at once, paths, failures."""

    delay: float = 0.0
    fail_first: dict[str, int] = field(default_factory=dict)
    connections: int = 0
    active: int = 0
    max_active: int = 0
    paths: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def serve(root: Path, *, delay: float = 0.0) -> Iterator[tuple[str, Stats]]:
    """Serve ``root`` at ``http://127.0.0.1:<port>``; yields the URL and live statistics."""
    stats = Stats(delay=delay)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def handle(self) -> None:
            with stats.lock:
                stats.connections += 1
            super().handle()

        def do_GET(self) -> None:
            # NOTE: a request is active from its arrival until just before its response is
            # written: a client cannot send its next request on that worker before then, so the
            # count is exact. Counting until handle() returned raced the client (a worker's next
            # connection arrived while the old handler was still closing: 5 seen at a limit of 4
            # on a loaded 2-core machine).
            with stats.lock:
                stats.paths[self.path] += 1
                failing = stats.fail_first.get(self.path, 0) >= stats.paths[self.path]
                stats.active += 1
                stats.max_active = max(stats.max_active, stats.active)
            time.sleep(stats.delay)
            with stats.lock:
                stats.active -= 1
            if failing:
                self.send_error(503, "injected failure")
                return
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", stats
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
