"""The dashboard and the virtual-cluster pages: create, configure, rename, delete."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from metadata_store.selectors import (
    bootstrap_servers,
    bootstraps,
    journal_backlog,
    live_agents,
    schema_registries,
)
from tenancy.console.forms import add_service_errors
from tenancy.console.scope import ACTIVE_FIRST, current_org, org_or_404
from virtualclusters import selectors, services
from virtualclusters.console.agent_command import agent_command, new_agent_key_for
from virtualclusters.console.forms import (
    AgentKeyCreateForm,
    ClusterConfigForm,
    ClusterCreateForm,
    ClusterDeleteForm,
    ClusterRenameForm,
)
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.mirror import selectors as mirror_selectors
from virtualclusters.models import VirtualCluster


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """The organization's clusters, with topic counts."""
    clusters = (
        VirtualCluster.objects.for_org(current_org(request))
        .annotate(topic_count=Count("topics"))
        .order_by("name")
    )
    return render(request, "console/dashboard.html", {"clusters": clusters})


@login_required
@require_http_methods(["GET", "POST"])
def cluster_new(request: HttpRequest) -> HttpResponse:
    org = org_or_404(request)
    form = ClusterCreateForm(
        request.POST or None, initial=ClusterConfigForm.initial_for(VirtualCluster())
    )
    if request.method == "POST" and form.is_valid():
        try:
            cluster = services.cluster_create(
                organization=org,
                name=form.cleaned_data["name"],
                config=form.config(),
                bucket_url=form.cleaned_data["bucket_url"],
            )
        except ValidationError as exc:
            add_service_errors(form, exc, fields=ClusterConfigForm.SERVICE_FIELDS)
        else:
            messages.success(request, f"Cluster {cluster.name} created.")
            return redirect("cluster-detail", cluster_id=cluster.public_id)
    return render(request, "console/cluster_new.html", {"form": form})


def render_cluster_page(
    request: HttpRequest, cluster: VirtualCluster, **context: Any
) -> HttpResponse:
    """The cluster page; ``context`` overrides a form (bound, with errors) or adds the
    one-time ``new_agent_key``. The bootstrap address is the cluster's own live agents'."""
    bootstrap = bootstrap_servers(cluster)
    entries = bootstraps(cluster)
    # The kcat example needs no security settings: a plaintext listener's addresses.
    plaintext = [b for b in entries if b.security_protocol in ("", "PLAINTEXT")]
    page = {
        "cluster": cluster,
        "bootstrap": ",".join(bootstrap),
        # One per agent group and listener kind, shown when there is more than one.
        "bootstraps": entries,
        "schema_registries": schema_registries(cluster),
        "example_bootstrap": ",".join(plaintext[0].servers) if plaintext else ",".join(bootstrap),
        "agent_command": agent_command("<agent key>"),
        "topics": selectors.topics_with_stats(cluster),
        "migrations": mirror_selectors.migrations_shown(cluster),
        "agent_keys": cluster.agent_keys.order_by(ACTIVE_FIRST, "-created_at"),
        "live_agents": live_agents(cluster).count(),
        "journal_backlog": journal_backlog(cluster),
        "config_form": ClusterConfigForm(initial=ClusterConfigForm.initial_for(cluster)),
        "rename_form": ClusterRenameForm(initial={"name": cluster.name}),
        "delete_form": ClusterDeleteForm(),
        "agent_key_form": AgentKeyCreateForm(),
        **context,
    }
    return render(request, "console/cluster_detail.html", page)


@login_required
def cluster_detail(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    new_key = new_agent_key_for(request, cluster)
    response = render_cluster_page(request, cluster, new_agent_key=new_key)
    if new_key is not None:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def cluster_config(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    form = ClusterConfigForm(request.POST)
    if form.is_valid():
        try:
            services.cluster_config_update(cluster=cluster, config=form.config())
        except ValidationError as exc:
            add_service_errors(form, exc, fields=ClusterConfigForm.SERVICE_FIELDS)
        else:
            messages.success(
                request, "Configuration saved. Agents pick it up on their next heartbeat."
            )
            return redirect("cluster-detail", cluster_id=cluster.public_id)
    return render_cluster_page(request, cluster, config_form=form)


@login_required
@require_POST
def cluster_rename(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    form = ClusterRenameForm(request.POST)
    if form.is_valid():
        try:
            services.cluster_rename(cluster=cluster, name=form.cleaned_data["name"])
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Cluster renamed to {cluster.name}.")
            return redirect("cluster-detail", cluster_id=cluster.public_id)
    return render_cluster_page(request, cluster, rename_form=form)


@login_required
@require_POST
def cluster_delete(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    form = ClusterDeleteForm(request.POST)
    if form.is_valid():
        name = cluster.name
        try:
            services.cluster_delete(cluster=cluster, confirm_name=form.cleaned_data["confirm_name"])
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Cluster {name} deleted.")
            return redirect("dashboard")
    return render_cluster_page(request, cluster, delete_form=form)
