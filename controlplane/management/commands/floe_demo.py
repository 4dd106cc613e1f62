"""Create (or reuse) the playground's demo organization, login, cluster and keys.

Prints one JSON object. Secrets are shown once by design, so the playground keeps the
demo's in a private file of its data folder to print them again on the next start.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from team.models import ApiKey
from team.services import api_key_create, user_signup
from tenancy.ids import secret_digest
from virtualclusters.models import AgentKey, VirtualCluster
from virtualclusters.services import agent_key_create, cluster_create

DEMO_EMAIL = "demo@floe.local"
DEMO_PASSWORD = "floe-demo-password"


class Command(BaseCommand):
    help = "Create the playground's demo tenant and print its login, cluster and keys as JSON."

    def handle(self, *args, **options):
        path = Path(settings.FLOE_DATA_DIR) / "demo.json"
        demo = json.loads(path.read_text()) if path.exists() else {}
        with transaction.atomic():
            demo = self._ensure(demo)
        path.write_text(json.dumps(demo))
        path.chmod(0o600)
        self.stdout.write(json.dumps(demo))

    def _ensure(self, demo: dict) -> dict:
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(username=DEMO_EMAIL).first()
        if user is None:
            user, org = user_signup(
                email=DEMO_EMAIL, password=DEMO_PASSWORD, organization_name="Demo"
            )
        else:
            org = user.memberships.get().organization  # the demo user's one organization
        cluster = VirtualCluster.objects.filter(organization=org, name="playground").first()
        if cluster is None:
            cluster = cluster_create(
                organization=org, name="playground", config={"default_partitions": 3}
            )
        if (
            not ApiKey.objects.active()
            .filter(digest=secret_digest(demo.get("api_key", "")))
            .exists()
        ):
            # The plaintext of an older "playground" key is lost: revoke it, make a new one.
            ApiKey.objects.for_org(org).active().filter(name="playground").update(
                revoked_at=timezone.now()
            )
            _, demo["api_key"] = api_key_create(
                organization=org, name="playground", role="owner", owner=user, created_by=user
            )
        agent_key_ok = AgentKey.objects.active().filter(
            cluster=cluster, digest=secret_digest(demo.get("agent_key", ""))
        )
        if not agent_key_ok.exists():
            cluster.agent_keys.active().filter(name="playground agent").update(
                revoked_at=timezone.now()
            )
            _, demo["agent_key"] = agent_key_create(cluster=cluster, name="playground agent")
        demo.update(email=DEMO_EMAIL, password=DEMO_PASSWORD, cluster=cluster.public_id)
        return demo
