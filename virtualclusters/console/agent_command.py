"""The commands that start an agent for a cluster, as the console shows them."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest

from tenancy.console import one_time_secret
from virtualclusters.models import AgentKey, VirtualCluster

# Where the example command keeps its segment files; users swap in an s3:// URL.
EXAMPLE_BUCKET_URL = "file:///var/lib/floe"


def agent_command(agent_key: str) -> str:
    """``floe-agent`` with flags, for an agent of the cluster ``agent_key`` belongs to."""
    return shlex.join(
        [
            "floe-agent",
            "--control-plane-url",
            settings.FLOE_PUBLIC_URL,
            "--agent-key",
            agent_key,
            "--bucket-url",
            EXAMPLE_BUCKET_URL,
        ]
    )


def agent_env_command(agent_key: str) -> str:
    """The same with environment variables (Docker, systemd, Kubernetes)."""
    env = {
        "FLOE_CONTROL_PLANE_URL": settings.FLOE_PUBLIC_URL,
        "FLOE_AGENT_KEY": agent_key,
        "FLOE_BUCKET_URL": EXAMPLE_BUCKET_URL,
    }
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items()) + " floe-agent"


@dataclass(frozen=True)
class NewAgentKey:
    """A key just created, with the commands that start an agent with it."""

    key: AgentKey
    plaintext: str

    @property
    def command(self) -> str:
        return agent_command(self.plaintext)

    @property
    def env_command(self) -> str:
        return agent_env_command(self.plaintext)


def new_agent_key_for(request: HttpRequest, cluster: VirtualCluster) -> NewAgentKey | None:
    """The key created just before this page view (post/redirect/get), shown once."""
    found = one_time_secret.take(request, "agent-key", scope=cluster.public_id)
    if found is None:
        return None
    key_id, plaintext = found
    key = AgentKey.objects.filter(cluster=cluster, public_id=key_id).first()
    return NewAgentKey(key, plaintext) if key else None
