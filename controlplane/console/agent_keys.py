"""Agent keys of a cluster: create (the key and the agent command are shown once), revoke."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from controlplane.console.clusters import render_cluster_page
from controlplane.console.forms import AgentKeyCreateForm, add_service_errors
from controlplane.console.tenancy import cluster_or_404, current_org
from virtualclusters import services
from virtualclusters.models import AgentKey

# Where the example command keeps its segment files; users swap in an s3:// URL.
EXAMPLE_BUCKET_URL = "file:///var/lib/floe"


@dataclass(frozen=True)
class NewAgentKey:
    """A key just created, with the commands that start an agent with it."""

    key: AgentKey
    plaintext: str

    @property
    def command(self) -> str:
        return shlex.join(
            [
                "floe-agent",
                "--control-plane-url",
                settings.FLOE_PUBLIC_URL,
                "--agent-key",
                self.plaintext,
                "--bucket-url",
                EXAMPLE_BUCKET_URL,
            ]
        )

    @property
    def env_command(self) -> str:
        env = {
            "FLOE_CONTROL_PLANE_URL": settings.FLOE_PUBLIC_URL,
            "FLOE_AGENT_KEY": self.plaintext,
            "FLOE_BUCKET_URL": EXAMPLE_BUCKET_URL,
        }
        return (
            " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items()) + " floe-agent"
        )


@login_required
@require_POST
def agent_key_create(request, cluster_id: str):
    """Create a key and answer with the cluster page showing it once.

    The plaintext is rendered straight into this response (never stored, not even in the
    session) and the response is not cached, so a reload cannot show it again.
    """
    cluster = cluster_or_404(request, cluster_id)
    form = AgentKeyCreateForm(request.POST)
    if form.is_valid():
        try:
            key, plaintext = services.agent_key_create(
                cluster=cluster, name=form.cleaned_data["name"]
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            response = render_cluster_page(
                request, cluster, new_agent_key=NewAgentKey(key, plaintext)
            )
            response["Cache-Control"] = "no-store"
            return response
    return render_cluster_page(request, cluster, agent_key_form=form)


@login_required
@require_POST
def agent_key_revoke(request, cluster_id: str, key_id: str):
    cluster = cluster_or_404(request, cluster_id)
    key = get_object_or_404(
        AgentKey.objects.for_org(current_org(request)), cluster=cluster, public_id=key_id
    )
    services.agent_key_revoke(key=key)
    messages.success(request, f"Agent key {key.name} revoked; agents using it are cut off.")
    return redirect("cluster-detail", cluster_id=cluster.public_id)
