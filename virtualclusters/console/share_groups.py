"""The share-groups page of a cluster (KIP-932): each group's members (client, agent,
partitions), each partition's start offset, records in flight and lag; resetting or
deleting a topic's offsets and deleting the group, while it has no live member."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from metadata_store.models import Topic
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.groups.share import (
    ShareGroupMissing,
    ShareGroupNotEmpty,
    share_group_delete,
    share_groups_describe,
    share_offsets_forget,
    share_offsets_reset,
)


def _change(request, cluster) -> None:
    """One form's change, reported as a message."""
    form = request.POST
    group_id, topic, action = form.get("group_id", ""), form.get("topic", ""), form.get("action")
    try:
        if action == "delete":
            share_group_delete(cluster=cluster, group_id=group_id)
            messages.success(request, f"Share group {group_id} deleted.")
        elif action == "forget":
            share_offsets_forget(cluster=cluster, group_id=group_id, topic=topic)
            messages.success(request, f"Offsets of {topic} deleted from share group {group_id}.")
        else:
            to = form.get("to", "")
            raw = form.get("offset", "").strip()
            offset = int(raw) if to == "offset" and raw.lstrip("-").isdigit() else None
            if to == "offset" and (offset is None or offset < 0):
                raise ValueError("Give the offset to reset to (0 or more).")
            share_offsets_reset(
                cluster=cluster, group_id=group_id, topic=topic, to=to, offset=offset
            )
            where = f"offset {offset}" if to == "offset" else f"the {to} offset"
            messages.success(request, f"Share group {group_id} reads {topic} from {where}.")
    except (ShareGroupNotEmpty, ShareGroupMissing, ValueError) as exc:
        messages.error(request, str(exc))


@login_required
@require_http_methods(["GET", "POST"])
def cluster_share_groups(request, cluster_id: str):
    cluster = cluster_or_404(request, cluster_id)
    if request.method == "POST":
        _change(request, cluster)
        return redirect("cluster-share-groups", cluster_id=cluster.public_id)
    groups = share_groups_describe(cluster)
    topics = list(
        Topic.objects.filter(cluster=cluster).order_by("name").values_list("name", flat=True)
    )
    for group in groups:
        read = list(dict.fromkeys(p["topic"] for p in group["partitions"]))
        group["topics"] = read or topics
    return render(request, "console/share_groups.html", {"cluster": cluster, "groups": groups})
