"""Agent keys of a cluster: create (the key and the agent command are shown once), revoke."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from tenancy.console import one_time_secret
from tenancy.console.forms import add_service_errors
from tenancy.console.scope import current_org
from virtualclusters import services
from virtualclusters.console.clusters import render_cluster_page
from virtualclusters.console.forms import AgentKeyCreateForm
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.models import AgentKey


@login_required
@require_POST
def agent_key_create(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """Create a key, then redirect to the cluster page, which shows it once."""
    cluster = cluster_or_404(request, cluster_id)
    form = AgentKeyCreateForm(request.POST)
    if form.is_valid():
        try:
            key, plaintext = services.agent_key_create(
                cluster=cluster,
                name=form.cleaned_data["name"],
                agent_group=form.cleaned_data["agent_group"],
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            one_time_secret.keep(
                request, "agent-key", scope=cluster.public_id, key_id=key.public_id,
                plaintext=plaintext,
            )  # fmt: skip
            return redirect("cluster-detail", cluster_id=cluster.public_id)
    return render_cluster_page(request, cluster, agent_key_form=form)


@login_required
@require_POST
def agent_key_revoke(request: HttpRequest, cluster_id: str, key_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    key = get_object_or_404(
        AgentKey.objects.for_org(current_org(request)), cluster=cluster, public_id=key_id
    )
    services.agent_key_revoke(key=key)
    messages.success(request, f"Agent key {key.name} revoked; agents using it are cut off.")
    return redirect("cluster-detail", cluster_id=cluster.public_id)
