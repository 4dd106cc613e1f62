"""Agents' journals (lightning topics and Ripcord, docs/ARCHITECTURE.md "Lightning
topics"): who sequences a journal, and which of its entries are committed.

A journal is sequenced by whoever holds its lease (`metadata_store.leases`, subject
``journal <agent id>/<boot>``): the agent that writes it renews it every few seconds, and
another agent of the cluster takes it over once it expired — the writer died, or could
not reach the control plane for longer than the lease. Holding the lease is not needed
for correctness (committing an entry twice returns its first answer, and every holder
commits in journal order); it keeps agents from sequencing the same journal in parallel.
"""

from __future__ import annotations

from typing import Any

from metadata_store.leases import LeaseLost, lease_renew, lease_take
from metadata_store.models import Lease, SegmentFile


def journal_lease_hold(
    *, cluster_id: int, journal: str, agent_id: str, seconds: float, token: str | None
) -> dict[str, Any]:
    """Renew the lease `token` holds, or take it when it is free or expired:
    ``{"token", "epoch", "holder"}``; ``{"token": None, "holder"}`` when another holds it."""
    subject = f"journal {journal}"
    if token:
        try:
            lease = lease_renew(
                cluster_id=cluster_id, subject=subject, token=token, seconds=seconds
            )
            return {"token": lease.token, "epoch": lease.epoch, "holder": lease.holder}
        except LeaseLost:
            pass
    taken = lease_take(cluster_id=cluster_id, subject=subject, holder=agent_id, seconds=seconds)
    if taken is None:
        holder = (
            Lease.objects.filter(cluster_id=cluster_id, subject=subject)
            .values_list("holder", flat=True)
            .first()
        )
        return {"token": None, "epoch": 0, "holder": holder or ""}
    return {"token": taken.token, "epoch": taken.epoch, "holder": taken.holder}


def journal_status(*, cluster_id: int, file_keys: list[str]) -> list[str]:
    """The keys among `file_keys` committed as files (in any state since: a file later
    compacted away or deleted was committed all the same)."""
    return sorted(
        SegmentFile.objects.filter(cluster_id=cluster_id, key__in=file_keys).values_list(
            "key", flat=True
        )
    )
