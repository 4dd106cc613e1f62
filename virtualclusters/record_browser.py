"""The console's message browser: a few records of a partition, read by a live agent of
the cluster.

The control plane holds no bucket credentials and stores no record data (seed 001: the
data stays in the customer's environment). It asks one of the cluster's live agents over
its peer channel (`GET /peer/v1/records`, signed with the cluster's peer secret as sender
`control-plane`); the agent reads through its normal read path and answers JSON, which
is passed on to the person who asked and kept nowhere.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from core.security import peer_auth
from metadata_store.live_agents import peer_secret_for
from metadata_store.selectors import live_agents
from virtualclusters.models import VirtualCluster

SENDER = "control-plane"
TIMEOUT_S = 10.0
MAX_LIMIT = 500


class BrowseUnavailable(Exception):
    """No live agent of the cluster could answer; the message says why."""


class BrowseNotFound(LookupError):
    """The agent knows no such topic or partition."""


def records_browse(
    cluster: VirtualCluster,
    *,
    topic: str,
    partition: int,
    offset: int | None,
    limit: int,
    timestamp: int | None = None,
) -> dict:
    """Up to ``limit`` records of ``topic``/``partition`` from ``offset`` on, from the
    first record at or after ``timestamp`` (ms since the epoch; the agent resolves it as
    ListOffsets by time does) when one is given, else the newest, as an agent of
    ``cluster`` reads them: ``{"records": [{offset, timestamp, key, value, headers}],
    "log_start_offset", "high_watermark", "agent"}`` (and ``from_offset`` by time) with
    keys, values and header values in base64."""
    agents = list(live_agents(cluster).filter(http_port__gt=0).order_by("-last_heartbeat"))
    if not agents:
        raise BrowseUnavailable("No agent of this cluster is running: start one to browse.")
    query = {"topic": topic, "partition": partition, "limit": max(1, min(limit, MAX_LIMIT))}
    if offset is not None:
        query["offset"] = offset
    if timestamp is not None:
        query["timestamp"] = timestamp
    target = "/peer/v1/records?" + urllib.parse.urlencode(query)
    secret = peer_secret_for(cluster)
    problems = []
    for agent in agents:
        request = urllib.request.Request(
            f"http://{agent.host}:{agent.http_port}{target}",
            headers={"Authorization": peer_auth.sign(secret, SENDER, "GET", target)},
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                found = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise BrowseNotFound(json.loads(exc.read() or b"{}").get("error", "")) from None
            problems.append(f"{agent.agent_id}: HTTP {exc.code}")
        except (OSError, ValueError) as exc:
            problems.append(f"{agent.agent_id}: {exc}")
        else:
            found["agent"] = agent.agent_id
            return found
    raise BrowseUnavailable("No agent answered: " + "; ".join(problems))
