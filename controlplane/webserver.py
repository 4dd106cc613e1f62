"""How the web server starts: uvicorn running ``controlplane.asgi`` — one process, as
`make run` (``controlplane.playground``), the benchmarks and the fault tests start it
(docker-compose.yml says the same in YAML)."""

from __future__ import annotations

import sys

# How long the server keeps an idle keep-alive connection (uvicorn's default is 5 s): a
# client's pool must give its idle connections up well before (the agents' does, after
# `agents.control_plane.POOL_IDLE_S`), or it sends a call down a connection the server
# is closing at that moment and the call fails ("Server disconnected"). The margin is
# for the client's own event loop, which counts a connection idle only once it has read
# the answer: a loaded agent reads late.
KEEP_ALIVE_S = 15


def command(
    port: int, *, workers: int = 1, access_log: bool = True, log_level: str | None = None
) -> list[str]:
    """The web server's command line, listening on 127.0.0.1:`port`. A stop (SIGTERM)
    lets requests in flight finish for up to 5 s."""
    args = [sys.executable, "-m", "uvicorn", "controlplane.asgi:application"]
    args += ["--host", "127.0.0.1", "--port", str(port), "--timeout-graceful-shutdown", "5"]
    args += ["--timeout-keep-alive", str(KEEP_ALIVE_S)]
    if workers != 1:
        args += ["--workers", str(workers)]
    if not access_log:
        args.append("--no-access-log")
    if log_level is not None:
        args += ["--log-level", log_level]
    return args
