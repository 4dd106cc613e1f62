"""The hosted Prometheus endpoint, ``GET /api/v1/clusters/{id}/metrics``, on the metadata
store alone (no agent): who may scrape it, what it exports, and that its queries do not
grow with the number of groups and partitions. The lag of a group a real client left
behind is tests/agents/groups/test_cluster_metrics.py's."""

from __future__ import annotations

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from metadata_store.models import Agent, GroupOffset, Partition
from metadata_store.topics import topic_create
from schema_registry.models import RegisteredSchema, Registry, Subject, SubjectVersion
from virtualclusters.jobs.models import JobRun

pytestmark = pytest.mark.django_db


def url(cluster) -> str:
    return f"/api/v1/clusters/{cluster.public_id}/metrics"


def samples(response) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) → value."""
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


def groups_with_lag(cluster, topic_name: str, groups: int, partitions: int) -> None:
    """`groups` groups, each committed at offset p on partition p of a topic whose
    partitions' high watermarks are 100: lag 100 − p."""
    topic = topic_create(cluster=cluster, name=topic_name, num_partitions=partitions)
    Partition.objects.filter(topic=topic).update(high_watermark=100)
    rows = Partition.objects.filter(topic=topic).order_by("index")
    GroupOffset.objects.bulk_create(
        GroupOffset(cluster=cluster, group_id=f"g{g}", partition=p, committed_offset=p.index)
        for g in range(groups)
        for p in rows
    )


def test_it_wants_an_api_key_and_hides_another_orgs_cluster(api, alice, bob):
    assert api().get(url(alice["cluster"])).status_code == 401
    assert api(bob["admin"]).get(url(alice["cluster"])).status_code == 404
    assert api(alice["reader"]).get(url(alice["cluster"])).status_code == 200


def test_it_exports_lag_throughput_agents_jobs_and_the_registry(api, alice, bob):
    cluster = alice["cluster"]
    groups_with_lag(cluster, "orders", groups=1, partitions=3)
    groups_with_lag(bob["cluster"], "secret", groups=1, partitions=1)
    Agent.objects.create(
        cluster=cluster, agent_id="agt-1", host="127.0.0.1", port=1, zone="z1",
        version="0.1.0", last_heartbeat=timezone.now(), load=2.5,
    )  # fmt: skip
    JobRun.objects.create(cluster=cluster, kind="compaction", state="failed", error="boom")
    JobRun.objects.create(cluster=cluster, kind="compaction", state="succeeded")
    registry = Registry.objects.create(cluster=cluster)
    schema = RegisteredSchema.objects.create(registry=registry, schema_id=1, fingerprint="f")
    subject = Subject.objects.create(registry=registry, name="orders-value")
    SubjectVersion.objects.create(subject=subject, version=1, schema=schema)
    gone = Subject.objects.create(registry=registry, name="old-value")
    SubjectVersion.objects.create(subject=gone, version=1, schema=schema, deleted=True)

    got = samples(api(alice["reader"]).get(url(cluster)))

    lag = {
        labels: value for (name, labels), value in got.items() if name == "floe_consumer_group_lag"
    }
    assert lag == {
        (("group", "g0"), ("partition", str(p)), ("topic", "orders")): 100.0 - p for p in range(3)
    }
    assert got[("floe_topic_records_in_total", (("topic", "orders"),))] == 300
    assert got[("floe_topic_partitions", (("topic", "orders"),))] == 3
    assert not [key for key in got if ("topic", "secret") in key[1]]  # bob's topic
    assert got[("floe_agents_live", ())] == 1
    assert got[("floe_agent_up", (("agent", "agt-1"), ("version", "0.1.0"), ("zone", "z1")))] == 1
    assert got[("floe_job_runs", (("kind", "compaction"), ("state", "failed")))] == 1
    assert got[("floe_job_runs", (("kind", "compaction"), ("state", "succeeded")))] == 1
    assert got[("floe_job_runs", (("kind", "retention"), ("state", "failed")))] == 0
    assert got[("floe_registry_subjects", ())] == 1
    assert got[("floe_registry_versions", ())] == 1
    assert got[("floe_registry_schemas", ())] == 1
    assert got[("floe_cluster_info", (("cluster", cluster.public_id), ("name", cluster.name)))]


def test_a_scraper_asking_for_text_gets_it_and_the_schema_documents_it(api, alice):
    client = api(alice["admin"])
    assert samples(client.get(url(alice["cluster"]), HTTP_ACCEPT="text/plain"))
    prometheus_accept = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    assert samples(client.get(url(alice["cluster"]), HTTP_ACCEPT=prometheus_accept))
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/clusters/{cluster_id}/metrics"]["get"]
    assert list(operation["responses"]["200"]["content"]) == ["text/plain"]
    assert [p["name"] for p in operation["parameters"] if p["in"] == "query"] == []  # no ?format=
    refused = api().get(url(alice["cluster"]), HTTP_ACCEPT="text/plain")
    assert refused.status_code == 401 and "error" in refused.json()


def test_its_queries_do_not_grow_with_groups_and_partitions(
    api, alice, bob, django_assert_max_num_queries
):
    client = api(alice["admin"])
    groups_with_lag(alice["cluster"], "orders", groups=1, partitions=1)
    client.get(url(alice["cluster"]))  # warm: the key's and the org's caches
    with django_assert_max_num_queries(100) as one:
        client.get(url(alice["cluster"]))
    queries = len(one.captured_queries)
    many = bob["cluster"]
    groups_with_lag(many, "orders", groups=8, partitions=6)
    bobs = api(bob["admin"])
    bobs.get(url(many))
    with django_assert_max_num_queries(queries):  # one group on one partition: as many
        got = samples(bobs.get(url(many)))
    assert sum(1 for name, _ in got if name == "floe_consumer_group_lag") == 48
