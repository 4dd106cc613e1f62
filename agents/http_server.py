"""The agent's HTTP port: `/healthz` for load balancers, `/metrics` for Prometheus, and
the peer channel (`agents.peers.server`)."""

from __future__ import annotations

import socket
from collections.abc import Callable

from aiohttp import web

from agents.metrics import render_all


def build_app(
    unhealthy_reason: Callable[[], str | None],
    degraded: Callable[[], list[str]] = lambda: [],
) -> web.Application:
    """The aiohttp application; `unhealthy_reason` says why the agent cannot serve
    (not registered, commits stuck), or None when it can; `degraded` what it serves
    differently now (Ripcord while the control plane is away) — still healthy: one
    `degraded: …` line each after the `ok`."""

    async def healthz(request: web.Request) -> web.Response:
        reason = unhealthy_reason()
        if reason is None:
            return web.Response(text="".join(["ok\n", *(f"degraded: {d}\n" for d in degraded())]))
        return web.Response(status=503, text=reason + "\n")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=render_all().encode("utf-8"),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app


async def start_http_on(app: web.Application, sock: socket.socket) -> web.AppRunner:
    """Serve `app` on an already bound socket (so the port can be registered first)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner


async def start_http(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve `app`; returns the runner (for cleanup) and the bound port."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    # The bound address, not `port`: port 0 asks the kernel for a free one.
    addresses = runner.addresses
    return runner, int(addresses[0][1]) if addresses else port
