"""The consumer-groups page of a cluster: state, members, assignments and a lag chart
per group; deleting a group that has no live members."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.groups.lag import groups_describe
from virtualclusters.groups.services import GroupNotEmpty, group_delete

# The longest bar takes this share of its row; the rest is for its value.
CHART_MAX_PERCENT = 70


def lag_chart(partitions: list[dict[str, Any]]) -> dict[str, Any]:
    """A bar chart (HTML, so its text keeps its size on a phone): one bar per partition,
    its length the offset lag relative to the group's largest, labelled with the lag in
    offsets and seconds."""
    largest = max((p["lag"] or 0 for p in partitions), default=0)
    bars = []
    for p in partitions:
        lag = p["lag"]
        percent = 0 if not lag or not largest else max(1, round(CHART_MAX_PERCENT * lag / largest))
        if lag is None:
            text = "not committed"
        elif p["lag_seconds"] is None:
            text = f"{lag:,}"
        else:
            text = f"{lag:,} · {p['lag_seconds']:.1f}s"
        bars.append(
            {
                "label": f"{p['topic']}-{p['partition']}",
                "percent": percent,
                "text": text,
                "behind": bool(lag),
            }
        )
    return {"bars": bars}


@login_required
@require_http_methods(["GET", "POST"])
def cluster_groups(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    if request.method == "POST":
        group_id = request.POST.get("group_id", "")
        try:
            deleted = group_delete(cluster=cluster, group_id=group_id)
        except GroupNotEmpty as exc:
            messages.error(request, str(exc))
        else:
            if deleted:
                messages.success(request, f"Group {group_id} and its offsets deleted.")
            else:
                messages.error(request, f"There is no group {group_id}.")
        return redirect("cluster-groups", cluster_id=cluster.public_id)
    groups = groups_describe(cluster)
    for group in groups:
        group["chart"] = lag_chart(group["partitions"])
    return render(request, "console/groups.html", {"cluster": cluster, "groups": groups})
