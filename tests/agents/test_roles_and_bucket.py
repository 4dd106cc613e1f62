"""Agent roles and the cluster's bucket, through real agent processes: Metadata lists
only agents that serve clients, and an agent with another bucket than its cluster's
does not start."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.django_db(transaction=True)


def brokers(bootstrap: str) -> set[int]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)


def test_metadata_lists_only_the_agents_that_serve_clients(agent, cluster):
    serving = agent(cluster.key, extra=["--roles", "produce,consume"])
    jobs = agent(cluster.key, extra=["--roles", "jobs"])
    other = agent(cluster.key)  # default: every role
    # Within a heartbeat (~3 s) every agent has heard of the others: ask until they agree.
    deadline = time.monotonic() + 15
    while True:
        seen_from_serving = brokers(serving.bootstrap)
        seen_from_jobs = brokers(jobs.bootstrap)
        seen_from_other = brokers(other.bootstrap)
        agreed = len(seen_from_serving) == 2 and seen_from_jobs == seen_from_serving
        if (agreed and seen_from_other == seen_from_serving) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(seen_from_serving) == 2
    assert seen_from_jobs == seen_from_serving == seen_from_other


def test_an_agent_with_another_bucket_than_its_clusters_is_refused_naming_both(
    agent, cluster, tmp_path
):
    first = agent(cluster.key)
    elsewhere = (tmp_path / "elsewhere").as_uri()
    (tmp_path / "elsewhere").mkdir()
    refused = agent(cluster.key, bucket_url=elsewhere, wait=False)
    assert refused.proc.wait(20) == 1
    last_line = refused.logs().strip().splitlines()[-1]
    assert "registration refused" in last_line and "409" in last_line
    assert elsewhere in last_line and first.cluster_id in last_line
    cluster.cluster.refresh_from_db()
    assert cluster.cluster.bucket_url != elsewhere
