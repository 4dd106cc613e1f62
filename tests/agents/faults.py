"""Fault injection for tests: `TcpProxy` (below) freezes, cuts or tears a TCP
connection; `FaultyProxy` is a real HTTP proxy between agents and the control plane that
can refuse commits.

It forwards every call unchanged, save that ``rewrite`` (when given) may change each
successful JSON answer on its way back — a different view of the cluster for one agent;
``hold`` (when given) names, from a call's path and body, the seconds to hold it before
it is forwarded — a slow answer to some calls only;
with ``fail_commits`` set, ``POST /agent/v1/commit``
gets a 503 instead, as when the metadata store is down. Used to show that a failed
commit fails exactly the produce requests of that segment and leaves nothing visible.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyProxy:
    def __init__(self, target: str, rewrite=None, hold=None):
        self.target = target.rstrip("/")
        self.rewrite = rewrite  # (path, decoded JSON answer) -> the answer to send
        self.hold = hold  # (path, request body) -> seconds to wait before forwarding
        self.fail_commits = False
        self.refused = 0
        self.answered: list[tuple[str, int]] = []  # (path, status) of every forwarded call
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if proxy.fail_commits and self.path.startswith("/agent/v1/commit"):
                    proxy.refused += 1
                    self._answer(503, b'{"error": "injected: metadata store unavailable"}')
                    return
                if proxy.hold is not None:
                    time.sleep(proxy.hold(self.path, body))
                request = urllib.request.Request(proxy.target + self.path, data=body, method="POST")
                for name in ("Authorization", "Content-Type"):
                    if self.headers.get(name):
                        request.add_header(name, self.headers[name])
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        answer = response.read()
                        if proxy.rewrite is not None:
                            answer = json.dumps(
                                proxy.rewrite(self.path, json.loads(answer))
                            ).encode()
                        proxy.answered.append((self.path, response.status))
                        self._answer(response.status, answer)
                except urllib.error.HTTPError as exc:
                    proxy.answered.append((self.path, exc.code))
                    self._answer(exc.code, exc.read())

            def _answer(self, status: int, body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller gave up waiting (a held call): nobody to answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class TcpProxy:
    """A TCP proxy in front of `target_port` that can freeze or cut the connection.

    ``frozen``: nothing is forwarded either way and nothing is closed — new connections
    are accepted and left hanging — as a hung worker, a dropped NAT entry or a frozen host
    would do. When it thaws, forwarding resumes. ``cut()``: every connection is reset and
    new ones are closed at once (a dependency that is down); ``reset_open()`` resets only
    what is open. ``tear_next_put()``: the next PUT going upstream is cut off halfway
    through its body and both sides reset.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        import socket

        self.target = (target_host, target_port)
        self.frozen = threading.Event()  # set = frozen
        self.down = False
        self._tear_next_put = False
        self.torn = 0
        self.accepted = 0  # connections forwarded
        self._lock = threading.Lock()
        self._sockets: set = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self.frozen.set()

    def thaw(self) -> None:
        self.frozen.clear()

    def cut(self) -> None:
        """Down: reset what is open, close what arrives."""
        self.down = True
        self.reset_open()

    def restore(self) -> None:
        self.down = False

    def reset_open(self) -> int:
        """Reset every open connection, as a peer closing its idle ones would, and go on
        accepting new ones; how many were reset."""
        with self._lock:
            sockets = list(self._sockets)
            for sock in sockets:
                _reset(sock)
            self._sockets.clear()
        return len(sockets) // 2

    def tear_next_put(self) -> None:
        self._tear_next_put = True

    def close(self) -> None:
        self._closed = True
        self.thaw()
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        import socket

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                _reset(client)
                continue
            self.accepted += 1
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            pair = {"up": 0}
            threading.Thread(
                target=self._pump, args=(client, upstream, pair, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, pair, False), daemon=True
            ).start()

    def _tear(self, data: bytes, sink, source, pair: dict) -> bool:
        """Forward a PUT's headers and half its body, then reset both sides."""
        if data.startswith(b"PUT "):
            pair["put"] = True
            end = data.find(b"\r\n\r\n")
            if end < 0 or end + 4 == len(data):
                return False  # headers only: the body follows in the next chunk
            cut = end + 4 + (len(data) - end - 4) // 2
        elif data[:4] in (b"GET ", b"HEAD", b"POST", b"DELE"):
            pair["put"] = False
            return False
        elif pair.get("put"):
            cut = len(data) // 2
        else:
            return False
        self._tear_next_put = False
        self.torn += 1
        sink.sendall(data[:cut])
        _reset(source)
        _reset(sink)
        return True

    def _pump(self, source, sink, pair: dict, upstream: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self.frozen.is_set() and not self._closed:
                    time.sleep(0.02)
                if upstream and self._tear_next_put and self._tear(data, sink, source, pair):
                    return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with self._lock:
                    self._sockets.discard(sock)
                try:
                    sock.shutdown(2)
                except OSError:
                    pass
                sock.close()


def _reset(sock) -> None:
    """Close with RST (SO_LINGER 0), as a dead peer or a firewall would."""
    import socket
    import struct

    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # A pump thread blocked in recv() on it holds the socket open past close(): wake
        # it, so the connection really ends (with the reset) on both sides at once.
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    sock.close()
