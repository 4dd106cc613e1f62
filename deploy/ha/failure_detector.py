"""A failure detector beside each Patroni node: a primary whose processes are gone from a
machine that is still up is replaced in seconds, not after its leader key's ttl.

Why: Patroni's leader is whoever holds the leader key in etcd, bound to a lease of `ttl`
seconds that the leader's Patroni renews every `loop_wait`. A leader that dies without a
word keeps the key until the lease runs out, and Patroni takes no `ttl` under 20 s (its
config validator and `Config._validate_and_adjust_timeouts` raise anything lower to 20,
whether it comes from the file, the environment or `patronictl edit-config`): a SIGKILLed
primary was replaced ~20 s after its death.

What this does, every `--interval` seconds (0.5), on each node that is not the leader:
reads the cluster's keys from etcd; connects to the leader's Patroni REST API and to its
PostgreSQL port (the addresses in its member key); if both REFUSE the connection (the
machine answered that nothing listens there: the processes are gone) for `--confirm`
seconds (2) on end, and the leader's lease has not been renewed for that long either, it
votes, in etcd, against that leader key — the key as it is, named by its `mod_revision`.
Once a majority of the cluster's members (2 of 3) vote against the same key, the first to
see it deletes the key in one etcd transaction that compares its `mod_revision` (a key
rewritten meanwhile, by a new leader or the old one's Patroni come back, is left alone).
Patroni does the rest as when the lease runs out: its watch on the key wakes the
standbys at once, and with `synchronous_mode` only the synchronous standby may take the
key and promote — it has every commit the primary acknowledged.

Why it is safe:
- Refused is not timed out. A connection refused is the leader's own machine saying no
  process listens on the port; a partition, a frozen machine or a lost one gives
  timeouts or "unreachable", which never count: those still wait for the ttl, as before.
- Both ports, seen by a majority, for seconds, and the lease not renewed for as long: a
  live Patroni renews its lease every `loop_wait` (1 s) and answers on its REST port; a
  PostgreSQL whose Patroni died keeps its port open (left to the ttl, as Patroni would).
- Only the key as it was is deleted (compare on `mod_revision`), and deleting it is what
  its expiry would do a few seconds later: Patroni's own leader race, synchronous-mode
  rule and fencing apply unchanged. A deposed leader whose Patroni comes back finds
  another leader and rejoins as a standby (`use_pg_rewind`).
- The one look not inside the deleting transaction is the lease's (etcd compares no
  lease's time left): a Patroni renewing in the milliseconds between that look and the
  delete, after seconds of silence with both its ports refusing, would lose its key as
  on an expiry and demote itself on its next loop, as Patroni does whenever its key goes.
- Nothing happens in maintenance mode (`pause` in the cluster's config), nor on the
  leader's own node, nor with no majority of members left to vote.

    python failure_detector.py PATRONI_CONFIG [--interval 0.5] [--confirm 2]

Reads Patroni's own configuration (name, scope, namespace, `etcd3` hosts; PATRONI_NAME,
PATRONI_SCOPE, PATRONI_NAMESPACE and PATRONI_ETCD3_HOSTS override them as they do for
Patroni). Speaks etcd's v3 JSON gateway over plain HTTP with the standard library only;
it refuses to start on a configuration with TLS or authentication for etcd, which it
does not speak. Logs one line per decision to stderr.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import socket
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass

import yaml

logger = logging.getLogger("failure_detector")

VOTES = "/floe-failure-detector"  # votes live beside Patroni's keys, not among them
VOTE_TTL_S = 3  # a vote no longer renewed (its detector stopped) lapses by itself
ETCD_TIMEOUT_S = 1.0
CONNECT_TIMEOUT_S = 1.0


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def _prefix_end(prefix: str) -> str:
    """The end of etcd's range holding every key that starts with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class EtcdUnavailable(Exception):
    pass


class Etcd:
    """The few calls of etcd's v3 JSON gateway this needs, each bounded; hosts in turn."""

    def __init__(self, hosts: list[str]) -> None:
        self.urls = [f"http://{host}" for host in hosts]

    def _call(self, path: str, body: dict) -> dict:
        data = json.dumps(body).encode()
        error: Exception | None = None
        for url in self.urls:
            request = urllib.request.Request(url + "/v3" + path, data=data, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=ETCD_TIMEOUT_S) as answer:
                    return json.loads(answer.read())
            except (OSError, ValueError) as exc:
                error = exc
        raise EtcdUnavailable(repr(error))

    def range_prefix(self, prefix: str) -> list[dict]:
        """Every key under `prefix`: key and value decoded, mod_revision, lease."""
        answer = self._call(
            "/kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))}
        )
        return [
            {
                "key": _unb64(kv["key"]),
                "value": _unb64(kv.get("value", "")),
                "mod_revision": kv.get("mod_revision", "0"),
                "lease": kv.get("lease", "0"),
            }
            for kv in answer.get("kvs", [])
        ]

    def lease_left(self, lease: str) -> tuple[int, int]:
        """The lease's seconds left (rounded down; -1 if gone) and its granted ttl."""
        answer = self._call("/lease/timetolive", {"ID": lease})
        return int(answer.get("TTL", -1)), int(answer.get("grantedTTL", 0))

    def put_with_ttl(self, key: str, value: str, ttl_s: int) -> None:
        lease = self._call("/lease/grant", {"TTL": ttl_s})["ID"]
        self._call("/kv/put", {"key": _b64(key), "value": _b64(value), "lease": lease})

    def delete(self, key: str) -> None:
        self._call("/kv/deleterange", {"key": _b64(key)})

    def delete_if_unchanged(self, key: str, mod_revision: str) -> bool:
        """Delete `key` only if its mod_revision is still `mod_revision` (one transaction)."""
        answer = self._call(
            "/kv/txn",
            {
                "compare": [{"key": _b64(key), "target": "MOD", "mod_revision": mod_revision}],
                "success": [{"request_delete_range": {"key": _b64(key)}}],
            },
        )
        return bool(answer.get("succeeded"))


def refused(address: tuple[str, int]) -> bool:
    """True only when the connection is refused: a timeout, an unreachable host or a name
    that does not resolve says nothing about the processes, so it is not a refusal."""
    try:
        with socket.create_connection(address, timeout=CONNECT_TIMEOUT_S):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def _address(url: str) -> tuple[str, int] | None:
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or not parts.port:
        return None
    return parts.hostname, parts.port


@dataclass(frozen=True)
class LeaderKey:
    name: str
    mod_revision: str
    lease: str


class FailureDetector:
    """One node's detector: `round()` every interval (the module docstring says what a
    round does); `suspect` is the leader key it has seen refuse since `refused_since`."""

    def __init__(self, etcd: Etcd, *, name: str, scope: str, namespace: str,
                 confirm_s: float) -> None:  # fmt: skip
        self.etcd, self.name, self.confirm_s = etcd, name, confirm_s
        self.prefix = f"/{namespace.strip('/')}/{scope}/"
        self.votes = f"{VOTES}/{scope}/"
        self.suspect: LeaderKey | None = None
        self.refused_since = 0.0
        self.voted = False

    def round(self) -> None:
        """One look at the cluster; votes, and deletes the leader key, when due."""
        keys = {
            kv["key"].removeprefix(self.prefix): kv for kv in self.etcd.range_prefix(self.prefix)
        }
        leader = keys.get("leader")
        config = json.loads(keys["config"]["value"]) if "config" in keys else {}
        members = {
            key.removeprefix("members/"): json.loads(kv["value"])
            for key, kv in keys.items()
            if key.startswith("members/")
        }
        if leader is None or leader["value"] == self.name or config.get("pause"):
            return self._clear()
        key = LeaderKey(leader["value"], leader["mod_revision"], leader["lease"])
        if not self._processes_gone(members.get(key.name, {})):
            return self._clear()
        now = time.monotonic()
        if key != self.suspect:
            self._clear()
            self.suspect, self.refused_since = key, now
            logger.info("leader %s refuses connections on both ports; watching", key.name)
            return
        if now - self.refused_since < self.confirm_s:
            return
        left, granted = self.etcd.lease_left(key.lease)
        if left >= 0 and left >= granted - self.confirm_s:
            return  # renewed within confirm_s: its Patroni lives, whatever the ports say
        self.etcd.put_with_ttl(self.votes + self.name, json.dumps(asdict(key)), VOTE_TTL_S)
        if not self.voted:
            logger.info("voted against leader %s (key revision %s)", key.name, key.mod_revision)
        self.voted = True
        votes = [
            kv for kv in self.etcd.range_prefix(self.votes)
            if kv["key"].removeprefix(self.votes) in members
            and kv["key"].removeprefix(self.votes) != key.name
            and json.loads(kv["value"]) == asdict(key)
        ]  # fmt: skip
        majority = len(members) // 2 + 1
        if len(votes) < majority:
            return
        if self.etcd.delete_if_unchanged(self.prefix + "leader", key.mod_revision):
            logger.warning(
                "deleted the leader key of %s: both its ports refused for %.1f s, its lease "
                "not renewed, %d of %d members agreeing",
                key.name, now - self.refused_since, len(votes), len(members),
            )  # fmt: skip
        self._clear()

    def _processes_gone(self, member: dict) -> bool:
        """The member's Patroni REST API and its PostgreSQL both refuse connections."""
        api, postgres = _address(member.get("api_url", "")), _address(member.get("conn_url", ""))
        return api is not None and postgres is not None and refused(api) and refused(postgres)

    def _clear(self) -> None:
        self.suspect = None
        if self.voted:
            self.etcd.delete(self.votes + self.name)
            self.voted = False


def patroni_settings(path: str) -> dict:
    """From a node's Patroni configuration and environment, as Patroni reads them: the
    etcd hosts, the node's name, the cluster's scope and namespace."""
    with open(path) as file:
        config = yaml.safe_load(file) or {}
    etcd = config.get("etcd3") or {}
    unsupported = {"protocol", "cacert", "cert", "key", "username", "password"} & set(etcd)
    if etcd.get("protocol", "http") != "http" or unsupported - {"protocol"}:
        raise SystemExit(f"failure_detector: etcd3 settings not supported: {sorted(unsupported)}")
    hosts = os.environ.get("PATRONI_ETCD3_HOSTS") or etcd.get("hosts") or etcd.get("host")
    if isinstance(hosts, str):
        hosts = [h.strip().strip("'\"") for h in hosts.strip("[]").split(",") if h.strip()]
    name = os.environ.get("PATRONI_NAME") or config.get("name")
    if not hosts or not name:
        raise SystemExit(
            "failure_detector: the Patroni configuration names no etcd3 hosts or no name"
        )
    return {
        "hosts": hosts,
        "name": name,
        "scope": os.environ.get("PATRONI_SCOPE") or config["scope"],
        "namespace": os.environ.get("PATRONI_NAMESPACE") or config.get("namespace", "/service/"),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="the node's Patroni configuration file")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between looks")
    parser.add_argument("--confirm", type=float, default=2.0,
                        help="seconds the leader must refuse (and not renew) before a vote")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s failure_detector %(message)s")
    settings = patroni_settings(args.config)
    detector = FailureDetector(
        Etcd(settings["hosts"]), name=settings["name"], scope=settings["scope"],
        namespace=settings["namespace"], confirm_s=args.confirm,
    )  # fmt: skip
    logger.info("watching %s%s as %s", settings["namespace"], settings["scope"], settings["name"])
    while True:
        started = time.monotonic()
        try:
            detector.round()
        except EtcdUnavailable as exc:  # Patroni copes with etcd away; so does this
            logger.info("etcd unavailable: %s", exc)
            detector.suspect = None
        except (ValueError, KeyError) as exc:  # a key not as expected: look again later
            logger.warning("skipped a round: %r", exc)
            detector.suspect = None
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))


if __name__ == "__main__":
    main(sys.argv[1:])
