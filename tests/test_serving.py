"""tests/serving.py, the one "start a process and wait until it answers" of the tests and
the benchmarks: an answer ends the wait, an exit or silence ends it with the log's tail."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.serving import free_port, wait_until_answering


def test_it_waits_for_an_http_server_and_a_port_and_returns_the_seconds(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # A 404 is an answer: the server is up.
        waited = wait_until_answering(f"http://127.0.0.1:{port}/nothing", proc, 30, "http.server")
        assert 0 <= waited < 30
        assert wait_until_answering(port, proc, 5, "http.server") < 5
        assert wait_until_answering(f"127.0.0.1:{port}", None, 5, "http.server") < 5
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_process_that_exits_first_is_named_with_its_code_and_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("bind: address in use\n")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(RuntimeError, match=r"(?s)the server exited \(3\).*address in use"):
        wait_until_answering(free_port(), proc, 30, "the server", log=log)


def test_silence_ends_in_a_timeout_that_says_where_it_waited():
    port = free_port()
    with pytest.raises(TimeoutError, match=f"nobody silent at {port} after 0.3s"):
        wait_until_answering(port, None, 0.3, "nobody")
