"""The audit log: console and REST writes are recorded with who made them; the log is
filterable, in the console and the API; another organization's events stay its own."""

from __future__ import annotations

import pytest

from team.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_console_and_api_writes_are_recorded_with_their_actor(client, api, alice, bob):
    client.force_login(alice["user"])
    client.post("/clusters/new", {"name": "audited", **CONFIG})
    cluster_id = AuditEvent.objects.get(target_type="cluster", target_name="audited").target_id
    admin = api(alice["admin"])
    admin.post(f"/api/v1/clusters/{cluster_id}/sasl-credentials/", {"username": "svc"})
    created = admin.post(f"/api/v1/clusters/{cluster_id}/agent-keys/", {"name": "edge"}).json()
    admin.delete(f"/api/v1/clusters/{cluster_id}/agent-keys/{created['id']}/")
    events = {(e.target_type, e.action, e.target_name): e.actor_label
              for e in AuditEvent.objects.for_org(alice["org"])}  # fmt: skip
    assert events[("cluster", "created", "audited")] == alice["user"].email
    assert events[("sasl_user", "created", "svc")].startswith("API key ")
    assert events[("agent_key", "revoked", "edge")].startswith("API key ")
    assert not AuditEvent.objects.for_org(bob["org"]).filter(target_name="audited").exists()

    page = client.get("/audit?target_type=agent_key&action=revoked").content.decode()
    assert "edge" in page and 'data-event="cluster-created"' not in page
    listed = admin.get("/api/v1/audit-events/", {"target_type": "sasl_user"}).json()
    assert [e["target_name"] for e in listed] == ["svc"]
    bobs = api(bob["admin"]).get("/api/v1/audit-events/").json()
    assert bobs and all(e["target_name"] not in ("svc", "edge", "audited") for e in bobs)


CONFIG = {
    "auto_create_topics": "on",
    "default_partitions": "1",
    "retention_value": "7",
    "retention_unit": "days",
    "max_flush_age_ms": "250",
    "max_flush_bytes": "8388608",
}
