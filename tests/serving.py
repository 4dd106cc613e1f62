"""Starting a server process and waiting until it answers: one rule for the tests and the
benchmarks (bench/ imports this module, as it imports tests/factories.py; it imports
neither the agent nor the control plane)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url_or_addr: str | int) -> bool:
    if isinstance(url_or_addr, int) or not url_or_addr.startswith(("http://", "https://")):
        host, _, port = str(url_or_addr).rpartition(":")
        with socket.socket() as sock:
            sock.settimeout(1)
            return sock.connect_ex((host or "127.0.0.1", int(port))) == 0
    try:
        with urllib.request.urlopen(url_or_addr, timeout=2):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code < 500  # a 405 is an answer; a 503 says "not yet"
    except OSError:
        return False


def wait_until_answering(
    url_or_addr: str | int,
    proc: subprocess.Popen | None,
    timeout_s: float,
    what: str,
    *,
    log: Path | None = None,
) -> float:
    """Wait until `url_or_addr` answers — an http(s) URL: any HTTP answer below 500; a
    "host:port" or a port of 127.0.0.1: a TCP connection — and return the seconds it took.
    Raises RuntimeError if `proc` exits first, TimeoutError after `timeout_s`; both name
    `what` and end with the last lines of `log`."""
    start = time.monotonic()
    while True:
        if _answers(url_or_addr):
            return time.monotonic() - start
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}) before answering{_tail(log)}")
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{what} silent at {url_or_addr} after {timeout_s}s{_tail(log)}")
        time.sleep(0.1)


def _tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    return f"; {log}:\n" + log.read_text(errors="replace")[-3000:]
