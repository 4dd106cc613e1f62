"""deploy/ha/failure_detector.py against a real etcd, with Patroni's keys written as
Patroni writes them (a leader key bound to the leader's lease, member keys with the
addresses of its REST API and PostgreSQL): the leader key is deleted only when a majority
of the members see both of the leader's ports refuse and its lease unrenewed, and then
at once. Two detectors (pg2, pg3) run in this process, one round each at a time.
Takes ~30 s.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from tests.ha.cluster import REPO, free_port, start_etcd

pytestmark = pytest.mark.ha

# The detectors' --confirm (2 s in production). Whole seconds: etcd gives a lease's time
# left in whole seconds, so "not renewed for CONFIRM_S" is only as fine as that.
CONFIRM_S = 1.0

_spec = importlib.util.spec_from_file_location(
    "failure_detector", REPO / "deploy" / "ha" / "failure_detector.py"
)
assert _spec is not None and _spec.loader is not None
failure_detector = importlib.util.module_from_spec(_spec)
sys.modules["failure_detector"] = failure_detector  # its dataclass looks itself up there
_spec.loader.exec_module(failure_detector)


@pytest.fixture(scope="module")
def etcd(tmp_path_factory) -> Iterator:
    port = free_port()
    server = start_etcd(tmp_path_factory.mktemp("etcd"), port, free_port())
    try:
        yield failure_detector.Etcd([f"127.0.0.1:{port}"])
    finally:
        server.kill()
        server.wait(10)


@contextlib.contextmanager
def listening() -> Iterator[int]:
    """A port something listens on (a live process's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


@contextlib.contextmanager
def unanswering() -> Iterator[int]:
    """A port whose connections time out, as a frozen or lost machine's do: something
    listens but its accept queue is full, so the kernel drops each new connection's SYN."""
    held: list[socket.socket] = []
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = sock.getsockname()[1]
        try:
            for _ in range(16):  # the queue holds one or two; bounded all the same
                client = socket.socket()
                client.settimeout(0.3)
                try:
                    client.connect(("127.0.0.1", port))
                except TimeoutError:
                    client.close()
                    break
                held.append(client)
            else:
                raise AssertionError("the accept queue never filled")
            yield port
        finally:
            for client in held:
                client.close()


def closed_port() -> int:
    """A port nothing listens on: a connection to it is refused."""
    return free_port()


class Cluster:
    """Patroni's keys for pg1 (the leader), pg2 and pg3, under a scope of their own."""

    def __init__(self, etcd, scope: str, *, api_port: int, pg_port: int, ttl: int = 20) -> None:
        self.etcd, self.scope = etcd, scope
        self.prefix = f"/service/{scope}/"
        self.lease = etcd._call("/lease/grant", {"TTL": ttl})["ID"]
        leader = {
            "api_url": f"http://127.0.0.1:{api_port}/patroni",
            "conn_url": f"postgres://127.0.0.1:{pg_port}/postgres",
            "role": "primary",
        }
        self.put("members/pg1", json.dumps(leader), self.lease)
        for name in ("pg2", "pg3"):  # alive: their own ports are not looked at
            with listening() as port:
                member = {"api_url": f"http://127.0.0.1:{port}/patroni",
                          "conn_url": f"postgres://127.0.0.1:{port}/postgres"}  # fmt: skip
            self.put(f"members/{name}", json.dumps(member))
        self.put("leader", "pg1", self.lease)
        self.detectors = [
            failure_detector.FailureDetector(
                etcd, name=name, scope=scope, namespace="/service/", confirm_s=CONFIRM_S
            )
            for name in ("pg2", "pg3")
        ]

    def put(self, key: str, value: str, lease: str | None = None) -> None:
        body = {"key": failure_detector._b64(self.prefix + key),
                "value": failure_detector._b64(value)}  # fmt: skip
        if lease:
            body["lease"] = lease
        self.etcd._call("/kv/put", body)

    def leader(self) -> str | None:
        keys = self.etcd.range_prefix(self.prefix + "leader")
        return keys[0]["value"] if keys else None

    def rounds(self, seconds: float, detectors=None) -> float | None:
        """Each detector's rounds, every 0.1 s, for `seconds` or until the leader key is
        gone: the seconds that took (None: still there)."""
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            for detector in detectors or self.detectors:
                detector.round()
            if self.leader() is None:
                return time.monotonic() - started
            time.sleep(0.1)
        return None


def test_a_leader_whose_processes_are_gone_loses_its_key_once_a_majority_sees_it(etcd):
    cluster = Cluster(etcd, "gone", api_port=closed_port(), pg_port=closed_port())
    # One member of three is no majority, however long it looks.
    assert cluster.rounds(2.5, cluster.detectors[:1]) is None
    # pg3 watches as long as pg2 did (CONFIRM_S), then votes too: the key goes at once.
    took = cluster.rounds(5)
    assert took is not None and CONFIRM_S <= took <= CONFIRM_S + 1.0, took


def test_a_leader_whose_rest_api_answers_keeps_its_key(etcd):
    with listening() as api:
        cluster = Cluster(etcd, "api-up", api_port=api, pg_port=closed_port())
        assert cluster.rounds(3) is None


def test_a_leader_whose_postgres_answers_keeps_its_key(etcd):
    with listening() as pg:
        cluster = Cluster(etcd, "pg-up", api_port=closed_port(), pg_port=pg)
        assert cluster.rounds(3) is None


def test_a_leader_whose_port_times_out_keeps_its_key(etcd):
    """Not refused: a partition, a frozen or a lost machine. Left to Patroni's ttl."""
    with unanswering() as api:
        cluster = Cluster(etcd, "timing-out", api_port=api, pg_port=closed_port())
        assert cluster.rounds(5) is None


def test_a_leader_that_renews_its_lease_keeps_its_key_whatever_its_ports_say(etcd):
    cluster = Cluster(etcd, "renewing", api_port=closed_port(), pg_port=closed_port())
    stop = threading.Event()

    def renew() -> None:  # as a live Patroni does every loop_wait
        while not stop.wait(0.3):
            etcd._call("/lease/keepalive", {"ID": cluster.lease})

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        assert cluster.rounds(3) is None
    finally:
        stop.set()
        renewer.join(5)


def test_nothing_is_deleted_in_maintenance_mode(etcd):
    cluster = Cluster(etcd, "paused", api_port=closed_port(), pg_port=closed_port())
    cluster.put("config", json.dumps({"ttl": 20, "pause": True}))
    assert cluster.rounds(3) is None


def test_a_leader_key_rewritten_meanwhile_is_left_alone(etcd):
    cluster = Cluster(etcd, "rewritten", api_port=closed_port(), pg_port=closed_port())
    old = etcd.range_prefix(cluster.prefix + "leader")[0]["mod_revision"]
    assert cluster.rounds(2.5, cluster.detectors[:1]) is None  # pg2 voted against `old`
    cluster.put("leader", "pg1", cluster.lease)  # the same leader, its key written again
    # pg3 votes against the key as it is now: two votes, but not against the same key.
    assert cluster.rounds(2.5, cluster.detectors[1:]) is None
    assert not etcd.delete_if_unchanged(cluster.prefix + "leader", old)
    assert cluster.leader() == "pg1"
