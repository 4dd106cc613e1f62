"""A real HTTP proxy between agents and the control plane that can refuse commits.

It forwards every call unchanged; with ``fail_commits`` set, ``POST /agent/v1/commit``
gets a 503 instead, as when the metadata store is down. Used to show that a failed
commit fails exactly the produce requests of that segment and leaves nothing visible.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyProxy:
    def __init__(self, target: str):
        self.target = target.rstrip("/")
        self.fail_commits = False
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if proxy.fail_commits and self.path.startswith("/agent/v1/commit"):
                    proxy.refused += 1
                    self._answer(503, b'{"error": "injected: metadata store unavailable"}')
                    return
                request = urllib.request.Request(proxy.target + self.path, data=body, method="POST")
                for name in ("Authorization", "Content-Type"):
                    if self.headers.get(name):
                        request.add_header(name, self.headers[name])
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        self._answer(response.status, response.read())
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, exc.read())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
