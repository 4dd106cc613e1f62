"""No control-plane call can wedge an agent: every call is bounded, a commit whose outcome
is unknown is retried with the same file key, /healthz says when commits are stuck, and
SIGTERM ends the process in bounded time — tried through a TCP proxy that freezes the
agent↔control-plane connection without closing it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agents.control_plane import (
    AgentKeyRejected,
    ControlPlaneClient,
    ControlPlaneRejected,
    ControlPlaneUnavailable,
)
from agents.runtime import SHUTDOWN_FLUSH_S
from agents.write_path import COMMIT_TIMEOUT_S
from tests.agents.faults import TcpProxy

FREEZE_S = 10.0


def test_a_call_to_a_control_plane_that_never_answers_times_out():
    async def scenario() -> float:
        async def silent(reader, writer):  # accepts, reads, never answers, never closes
            await reader.read(1 << 20)
            await asyncio.sleep(60)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = ControlPlaneClient(f"http://127.0.0.1:{port}", "key", timeout_s=1.0)
        started = time.monotonic()
        try:
            with pytest.raises(ControlPlaneUnavailable) as caught:
                await asyncio.wait_for(client.call("topics/list", {}), 10)
            assert caught.value.outcome_unknown
            assert not client.link.up  # the next decision need not wait to find out
            return time.monotonic() - started
        finally:
            await client.close()
            server.close()

    assert asyncio.run(scenario()) < 3


@pytest.mark.django_db(transaction=True)
def test_a_connection_idle_near_the_web_servers_keep_alive_is_not_reused(live_server):
    """The web server closes a connection idle `KEEP_ALIVE_S`; the agent's pool gives one
    up well before (`POOL_IDLE_S`), so no call is sent down a connection the server is
    closing as it arrives: after an idle just past the pool's, the next call opens a new
    connection."""
    from agents.control_plane import POOL_IDLE_S
    from controlplane.webserver import KEEP_ALIVE_S, command

    assert POOL_IDLE_S <= KEEP_ALIVE_S - 10  # room for a loaded agent's late reads
    line = command(8000)
    assert line[line.index("--timeout-keep-alive") + 1] == str(KEEP_ALIVE_S)
    compose = (Path(__file__).parents[2] / "docker-compose.yml").read_text()
    assert f"--timeout-keep-alive {KEEP_ALIVE_S}" in compose
    proxy = TcpProxy(live_server.port)

    async def scenario() -> None:
        client = ControlPlaneClient(proxy.url, "not-a-key", timeout_s=5.0)
        try:
            for _ in range(2):  # answered (401) on one kept-alive connection
                with pytest.raises(AgentKeyRejected):
                    await client.call("topics/list", {})
            assert proxy.accepted == 1
            await asyncio.sleep(POOL_IDLE_S + 0.5)
            with pytest.raises(AgentKeyRejected):
                await client.call("topics/list", {})
            assert proxy.accepted == 2
        finally:
            await client.close()

    try:
        asyncio.run(scenario())
    finally:
        proxy.close()


def test_the_link_goes_down_on_a_failed_call_and_up_on_the_next_answer():
    """`client.link` follows the calls: down on a refused connection or a 5xx, up again on
    any answer (a 4xx included: the control plane is there), waking whoever waits."""

    async def scenario() -> None:
        status = {"code": 503}

        async def answer(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            code = status["code"]
            writer.write(
                f"HTTP/1.1 {code} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode()
            )
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = ControlPlaneClient(f"http://127.0.0.1:{port}", "key", timeout_s=2.0)
        try:
            assert client.link.up
            with pytest.raises(ControlPlaneUnavailable):
                await client.call("topics/list", {})
            assert not client.link.up
            assert client.link.down_for_s >= 0
            assert not await client.link.wait_up(0.05)
            waiter = asyncio.ensure_future(client.link.wait_up(5))
            status["code"] = 404
            with pytest.raises(ControlPlaneRejected):
                await client.call("topics/list", {})
            assert client.link.up and client.link.down_for_s == 0
            assert await asyncio.wait_for(waiter, 1)
        finally:
            await client.close()
            server.close()

    asyncio.run(scenario())


def test_a_frozen_call_takes_the_link_down_fast_and_a_probe_brings_it_back():
    """A call unanswered for the stall bound, with nothing else answered meanwhile, marks
    the link down long before the call's own bound ends; while down, the control plane's
    /healthz is probed and the first healthy answer brings the link up without any call.
    A long poll left waiting does not count as a frozen link."""

    async def scenario() -> None:
        healthy = {"now": False}

        async def serve(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            if head.startswith(b"GET /healthz"):
                code = 200 if healthy["now"] else 503
                writer.write(
                    f"HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
                )
                await writer.drain()
                writer.close()
                return
            await asyncio.sleep(30)  # every POST: accepted, never answered (frozen)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = ControlPlaneClient(f"http://127.0.0.1:{port}", "key", timeout_s=10.0)
        try:
            poll = asyncio.ensure_future(client.call("tail-feed", {}, timeout_s=8))
            await asyncio.sleep(client.link.stall_after_s * 2)
            assert client.link.up, "a long poll waiting is not a frozen link"
            started = time.monotonic()
            commit = asyncio.ensure_future(client.call("commit", {}))
            while client.link.up and time.monotonic() - started < 5:
                await asyncio.sleep(0.02)
            took = time.monotonic() - started
            assert not client.link.up and took < 1.0, took
            assert not commit.done()  # the call itself still waits out its own bound
            await asyncio.sleep(client.link.probe_interval_s * 3)
            assert not client.link.up  # the probe got 503s: still down
            healthy["now"] = True
            assert await client.link.wait_up(3), "the probe brings the link back up"
            for task in (poll, commit):
                task.cancel()
            await asyncio.gather(poll, commit, return_exceptions=True)
        finally:
            await client.close()
            server.close()

    asyncio.run(scenario())


def test_a_stall_of_the_agents_own_loop_is_not_a_frozen_control_plane():
    """The answer arrived in time but the agent's loop was stalled (busy, starved of CPU)
    past the stall bound: the late stall check looks again before calling the link down,
    and by then the answer has been handled — no outage."""
    from agents.control_plane_link import ControlPlaneLink

    async def scenario() -> None:
        link = ControlPlaneLink(stall_after_s=0.1, probe_interval_s=10)
        loop = asyncio.get_running_loop()
        token = link.call_started()
        answered = loop.create_future()

        async def caller() -> None:
            await answered  # read at 50 ms, handled a turn of the loop later (as aiohttp's)
            link.record_answer()
            link.call_ended(token)

        task = asyncio.ensure_future(caller())
        loop.call_later(0.05, answered.set_result, None)
        time.sleep(0.3)  # the whole loop stalls past the 0.1 s bound
        await task
        await asyncio.sleep(0.2)
        assert link.up and link.outages == 0

        # A call really unanswered past the bound, the loop on time: down, as before.
        link.call_started()
        await asyncio.sleep(0.3)
        assert not link.up and link.outages == 1

    asyncio.run(scenario())


class _Acks:
    """Produces one message at a time and records when each was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 120000,
            }
        )
        self.acked: dict[bytes, float] = {}
        self.failed: list = []

    def send(self, value: bytes) -> None:
        def done(err, msg) -> None:
            if err is None:
                self.acked[msg.value()] = time.monotonic()
            else:
                self.failed.append(err)

        self.producer.produce("frozen", value=value, on_delivery=done)
        self.producer.poll(0)

    def wait_for(self, value: bytes, timeout_s: float) -> float | None:
        deadline = time.monotonic() + timeout_s
        while value not in self.acked and time.monotonic() < deadline:
            self.producer.poll(0.05)
        return self.acked.get(value)


@pytest.mark.kafka
@pytest.mark.django_db(transaction=True)
def test_after_a_frozen_control_plane_connection_the_agent_acks_again_without_restart(
    agent, cluster, live_server
):
    proxy = TcpProxy(int(live_server.url.rsplit(":", 1)[1]))
    try:
        a = agent(cluster.key, control_plane_url=proxy.url)
        acks = _Acks(a.bootstrap)
        acks.send(b"before")
        assert acks.wait_for(b"before", 30), acks.failed
        assert a.health()[0] == 200

        proxy.freeze()
        acks.send(b"during")
        time.sleep(7)
        status, reason = a.health()
        assert status == 503 and "commit" in reason, (status, reason)
        time.sleep(FREEZE_S - 7)
        proxy.thaw()
        thawed = time.monotonic()

        acks.send(b"after")
        for value in (b"during", b"after"):
            acked_at = acks.wait_for(value, COMMIT_TIMEOUT_S + 5)
            assert acked_at is not None, (value, acks.failed, a.logs()[-3000:])
            assert acked_at - thawed <= COMMIT_TIMEOUT_S + 5
        assert not acks.failed
        deadline = time.monotonic() + 10
        while a.health()[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert a.health() == (200, "ok\n")
        assert a.proc.poll() is None  # no restart

        # SIGTERM while the control plane is frozen again: the process still ends, in time.
        proxy.freeze()
        acks.send(b"at-shutdown")
        acks.producer.poll(0.5)
        started = time.monotonic()
        code = a.stop(timeout_s=SHUTDOWN_FLUSH_S + 15)
        took = time.monotonic() - started
        assert code == 0 and took < SHUTDOWN_FLUSH_S + 10, (code, took, a.logs()[-3000:])
    finally:
        proxy.close()
