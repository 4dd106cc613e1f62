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


def test_commit_files_commits_entries_in_order_in_one_call_and_answers_each():
    alice, alice_key = make_cluster("alice-commit-files")
    bob, bob_key = make_cluster("bob-commit-files")
    api = AgentApi(alice_key)
    topic = api.create_topic("t")
    keys = [f"{alice.public_id}/journal/agt-a/b1/{n:012d}.seg" for n in (1, 2, 3)]

    def idempotent(sequence: int) -> dict:
        return batch(topic, 0, 2, producer_id=7, producer_epoch=0, base_sequence=sequence)

    # One producer's sequences run on across the files: only their order makes them fit.
    files = [
        {"file_key": keys[0], "size": 100, "batches": [idempotent(0)]},
        {"file_key": keys[1], "size": 200, "batches": [idempotent(2), batch(topic, 0, pos=100)]},
        {"file_key": keys[2], "size": 100, "batches": [idempotent(9)]},  # a gap
    ]
    answer = api("commit-files", {"files": files})
    codes = [[(b["error_code"], b["base_offset"]) for b in f["batches"]] for f in answer["files"]]
    assert codes == [[(0, 0)], [(0, 2), (0, 4)], [(45, -1)]]
    # Sent again (the answer was lost): each file's first answer, nothing stored twice.
    assert api("commit-files", {"files": files}) == answer
    assert api("journal/status", {"file_keys": keys}) == {"committed": sorted(keys)}
    # A file of another cluster, or a key twice: the call is refused, nothing committed.
    bobs = AgentApi(bob_key).raw("commit-files", {"files": files})
    assert bobs.status_code == 400 and "files[0]" in bobs.json()["error"]
    twice = api.raw("commit-files", {"files": [files[0], files[0]]})
    assert twice.status_code == 400 and "twice" in twice.json()["error"]
