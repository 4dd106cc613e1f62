"""A cluster's Diagnostics (console page and REST): what its live agents report in their
heartbeats (`agents/client_stats.py`), read for problems an operator can fix, each with
advice —

- small files: commits per minute and the average segment file size per agent; many
  small files cost a PUT and a commit each (and compaction later);
- producers that send tiny batches (``linger.ms`` 0: about one record a batch);
- clients that name no zone in ``client.id`` (``floe_az=<zone>``) while the agents are
  in zones, so their traffic cannot stay in their zone.

The numbers are since each agent started (its counters), so an agent that just started
is not judged (`MIN_UPTIME_S`, `MIN_BATCHES`).
"""

from __future__ import annotations

import re
from typing import Any

from metadata_store.selectors import live_agents
from virtualclusters.models import VirtualCluster

MIN_UPTIME_S = 10
SMALL_FILE_BYTES = 1024 * 1024  # WarpStream's guidance: segments of a few MiB or more
MANY_COMMITS_PER_MIN = 60  # more than one a second per agent
MIN_BATCHES = 50  # a client judged on fewer batches is judged on noise
TINY_BATCH_RECORDS = 2.0
# As agents.zone_routing reads a zone hint (key=value features in client.id).
_ZONE_HINT = re.compile(r"(?:^|[\s,;])(?:floe_az|ws_az)=[A-Za-z0-9._:/-]{1,64}")


def cluster_diagnostics(cluster: VirtualCluster) -> dict[str, Any]:
    """``{"agents": [per agent: its numbers], "clients": [per client id: produce
    counts], "findings": [{kind, title, subject, message, advice}]}`` from the live
    agents' last heartbeats."""
    agents, findings = [], []
    producers: dict[str, list[int]] = {}
    zones = set()
    for agent in live_agents(cluster).order_by("agent_id"):
        stats = agent.stats or {}
        if agent.zone:
            zones.add(agent.zone)
        uptime = int(stats.get("uptime_s") or 0)
        files = int(stats.get("files_committed") or 0)
        size = int(stats.get("file_bytes_committed") or 0)
        per_min = round(files * 60 / uptime, 1) if uptime else None
        average = size // files if files else None
        reasons = dict(stats.get("flush_reasons") or {})
        agents.append({"agent_id": agent.agent_id, "zone": agent.zone, "uptime_s": uptime,
                       "files_committed": files, "commits_per_min": per_min,
                       "avg_file_bytes": average, "flush_reasons": reasons})  # fmt: skip
        for client, counts in (stats.get("producers") or {}).items():
            total = producers.setdefault(client, [0, 0, 0])
            for n, count in enumerate(counts[:3]):
                total[n] += int(count)
        if uptime >= MIN_UPTIME_S and average is not None and per_min is not None:
            if average < SMALL_FILE_BYTES and per_min > MANY_COMMITS_PER_MIN:
                findings.append(_small_files(agent.agent_id, per_min, average, reasons))
    for client, (_requests, batches, records) in sorted(producers.items()):
        shown = client or "(no client.id, or past the first 32)"
        if batches >= MIN_BATCHES and records / batches < TINY_BATCH_RECORDS:
            findings.append({
                "kind": "tiny_batches", "title": "Tiny batches", "subject": shown,
                "message": f"{records / batches:.1f} records a batch over {batches} batches: "
                           "each record is sent alone (linger.ms 0, or batch.size tiny).",
                "advice": "Set linger.ms to 5–100 (and batch.size to 64 KiB or more) so a "
                          "batch carries many records: fewer requests, fewer and larger files.",
            })  # fmt: skip
        if zones and client and not _ZONE_HINT.search(client):
            findings.append({
                "kind": "no_zone_hint", "title": "No zone hint", "subject": shown,
                "message": f"client.id names no zone, and this cluster's agents are in "
                           f"{', '.join(sorted(zones))}: its traffic may cross zones.",
                "advice": f"Add floe_az=<the client's zone> to client.id (e.g. "
                          f"\"{client},floe_az={sorted(zones)[0]}\").",
            })  # fmt: skip
    clients = [{"client_id": c, "requests": n[0], "batches": n[1], "records": n[2],
                "records_per_batch": round(n[2] / n[1], 1) if n[1] else None}
               for c, n in sorted(producers.items())]  # fmt: skip
    return {"agents": agents, "clients": clients, "findings": findings}


def _small_files(
    agent_id: str, per_min: float, average: int, reasons: dict[str, int]
) -> dict[str, Any]:
    by_age = reasons.get("age", 0) >= sum(reasons.values()) / 2 if reasons else True
    change = (
        "raise its flush age (--batch-timeout-ms, FLOE_BATCH_TIMEOUT) so a segment "
        "collects more before it is written"
        if by_age
        else "raise its segment size (FLOE_BATCH_MAX_BYTES)"
    )
    return {
        "kind": "small_files",
        "title": "Small files",
        "subject": agent_id,
        "message": f"{per_min:g} commits a minute of {average / 1024:.1f} KiB files on average.",
        "advice": f"Most segments are sealed by {'age' if by_age else 'size'}: {change}; "
        "fewer agents per zone, or producers that batch more, help too. Each file is a PUT "
        "and a commit, and compaction rewrites it later.",
    }
