"""The schema linker's client of a source registry (agents/schema_linker.py) against a
small HTTP server on 127.0.0.1 that answers as a registry would, and as one should not:
paths quoted whole (a subject may hold a '/'), basic auth sent, Confluent's error codes
kept, anything else — not JSON, nobody listening, no answer in time — a
`SourceRegistryError` saying so, never a hang."""

from __future__ import annotations

import asyncio
import base64
import socket

import pytest
from aiohttp import web

from agents import schema_linker
from agents.schema_linker import SourceRegistry, SourceRegistryError

pytestmark = pytest.mark.timeout(30)


async def _serve(routes: web.RouteTableDef) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


def _run(coroutine):
    return asyncio.run(coroutine)


def test_it_quotes_subjects_whole_and_sends_basic_auth():
    routes = web.RouteTableDef()
    seen: list = []

    @routes.get("/base/subjects/{subject}/versions")
    async def versions(request: web.Request) -> web.Response:
        seen.append(
            (
                request.match_info["subject"],
                dict(request.query),
                base64.b64decode(request.headers["Authorization"][6:]).decode(),
            )
        )
        return web.json_response([1, 3])

    async def scenario():
        runner, url = await _serve(routes)
        source = SourceRegistry(url + "/base/", "linker", "pa:ss")
        try:
            return await source.get("subjects", "money/v1.proto", "versions", deleted="true")
        finally:
            await source.close()
            await runner.cleanup()

    assert _run(scenario()) == [1, 3]
    assert seen == [("money/v1.proto", {"deleted": "true"}, "linker:pa:ss")]


def test_errors_keep_confluents_code_and_anything_else_is_named():
    routes = web.RouteTableDef()

    @routes.get("/subjects/{subject}/versions")
    async def missing(request: web.Request) -> web.Response:
        return web.json_response({"error_code": 40401, "message": "Subject not found."}, status=404)

    @routes.get("/config")
    async def broken(request: web.Request) -> web.Response:
        return web.Response(text="<html>bad gateway</html>", status=502)

    async def scenario():
        runner, url = await _serve(routes)
        source = SourceRegistry(url)
        caught = []
        try:
            for path in (("subjects", "gone", "versions"), ("config",)):
                with pytest.raises(SourceRegistryError) as error:
                    await source.get(*path)
                caught.append(error.value)
        finally:
            await source.close()
            await runner.cleanup()
        return caught

    missing_error, broken_error = _run(scenario())
    assert missing_error.error_code == 40401 and "Subject not found." in str(missing_error)
    assert broken_error.error_code == 0 and "HTTP 502, not JSON" in str(broken_error)


def test_nobody_listening_or_no_answer_in_time_is_an_error_not_a_hang(monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    routes = web.RouteTableDef()

    @routes.get("/subjects")
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.json_response([])

    monkeypatch.setattr(schema_linker, "SOURCE_TIMEOUT_S", 0.5)

    async def scenario():
        runner, url = await _serve(routes)
        messages = []
        try:
            for base in (f"http://127.0.0.1:{closed}", url):
                source = SourceRegistry(base)
                started = asyncio.get_running_loop().time()
                with pytest.raises(SourceRegistryError) as error:
                    await source.get("subjects")
                messages.append((str(error.value), asyncio.get_running_loop().time() - started))
                await source.close()
        finally:
            await runner.cleanup()
        return messages

    (refused, refused_s), (slow_answer, slow_s) = _run(scenario())
    assert "ClientConnectorError" in refused and refused_s < 2
    assert "TimeoutError" in slow_answer or "Timeout" in slow_answer, slow_answer
    assert slow_s < 2
