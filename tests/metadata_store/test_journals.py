"""The agent API's journal calls: a journal's lease (taken, renewed, refused while
another holds it), which entries are committed, and another cluster's key seeing none."""

from __future__ import annotations

import pytest

from tests.factories import make_cluster
from tests.metadata_store.conftest import AgentApi, batch

pytestmark = pytest.mark.django_db


def test_a_journal_lease_is_taken_renewed_and_refused_to_another_agent():
    _, key = make_cluster("journals")
    api = AgentApi(key)
    mine = api("journal/lease", {"journal": "agt-a/b1", "agent_id": "agt-a", "lease_s": 15})
    assert mine["token"] and mine["epoch"] == 1 and mine["holder"] == "agt-a"
    renewed = api(
        "journal/lease",
        {"journal": "agt-a/b1", "agent_id": "agt-a", "lease_s": 15, "token": mine["token"]},
    )
    assert renewed["token"] == mine["token"] and renewed["epoch"] == 1
    other = api("journal/lease", {"journal": "agt-a/b1", "agent_id": "agt-b", "lease_s": 15})
    assert other == {"token": None, "epoch": 0, "holder": "agt-a"}
    bad = api.raw("journal/lease", {"journal": "no slash", "agent_id": "agt-b"})
    assert bad.status_code == 400 and "journal" in bad.json()["error"]


def test_journal_status_names_the_committed_entries_of_the_callers_cluster_only():
    alice, alice_key = make_cluster("alice-journals")
    bob, bob_key = make_cluster("bob-journals")
    api = AgentApi(alice_key)
    topic = api.create_topic("t")
    done = f"{alice.public_id}/journal/agt-a/b1/000000000001.seg"
    waiting = f"{alice.public_id}/journal/agt-a/b1/000000000002.seg"
    api("commit", {"file_key": done, "size": 100, "batches": [batch(topic, 0)]})
    assert api("journal/status", {"file_keys": [done, waiting]}) == {"committed": [done]}
    # Bob's key: Alice's keys are not under its prefix (400), and it knows none of them.
    refused = AgentApi(bob_key).raw("journal/status", {"file_keys": [done]})
    assert refused.status_code == 400
    bobs = f"{bob.public_id}/journal/agt-a/b1/000000000001.seg"
    assert AgentApi(bob_key)("journal/status", {"file_keys": [bobs]}) == {"committed": []}


def test_journal_commit_commits_consecutive_entries_in_order_in_one_call_exactly_once():
    cluster, key = make_cluster("journal-commit")
    api = AgentApi(key)
    topic = api.create_topic("t")
    pid = api("init-producer-id", {"transactional_id": None})["producer_id"]

    def entry(position: int, sequence: int) -> dict:
        idem = {"producer_id": pid, "producer_epoch": 0, "base_sequence": sequence}
        return {
            "file_key": f"{cluster.public_id}/journal/agt-a/b1/{position:012d}.seg",
            "size": 100,
            "batches": [batch(topic, 0, 2, **idem)],
        }

    # The first entry was committed alone already (a retry, or another agent's recovery).
    first = api("commit", entry(1, 0))["batches"][0]
    assert first["base_offset"] == 0
    answer = api("journal/commit", {"files": [entry(1, 0), entry(2, 2), entry(3, 4)]})
    # In order: the producer's sequences 2 and 4 follow 0 (out of order would be refused).
    assert [f["batches"][0]["error_code"] for f in answer["files"]] == [0, 0, 0]
    assert [f["batches"][0]["base_offset"] for f in answer["files"]] == [0, 2, 4]
    # Committed again, every file gets its first answer; nothing is stored twice.
    again = api("journal/commit", {"files": [entry(2, 2), entry(3, 4)]})
    assert [f["batches"][0]["base_offset"] for f in again["files"]] == [2, 4]
    assert api("commit", entry(4, 6))["batches"][0]["base_offset"] == 6
    # Bad input: a file outside the cluster, none at all, a batch past its file's end.
    other = {**entry(5, 8), "file_key": "vci_other/journal/agt-a/b1/000000000005.seg"}
    refused = api.raw("journal/commit", {"files": [entry(5, 8), other]})
    assert refused.status_code == 400 and "$.files[1]" in refused.json()["error"]
    assert api.raw("journal/commit", {"files": []}).status_code == 400
    past = {**entry(5, 8), "size": 50}
    assert api.raw("journal/commit", {"files": [past]}).status_code == 400
    assert api("journal/status", {"file_keys": [entry(5, 8)["file_key"]]}) == {"committed": []}
