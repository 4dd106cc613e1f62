"""The agent API as the web server serves it (``controlplane.asgi``, on its event loop):
the same answers as the Django views — short JSON for every error — over real HTTP."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

import pytest

from metadata_store.agent_api import endpoint
from metadata_store.models import SegmentFile
from metadata_store.topics import topic_create
from tests.metadata_store.conftest import batch
from virtualclusters.services import cluster_delete

pytestmark = pytest.mark.django_db(transaction=True)


def _call(live_server, path: str, body: bytes = b"{}", *, method="POST", headers=None):
    parts = urlsplit(live_server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request(method, path, body=body if method == "POST" else None, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.getheader("Content-Type") == "application/json", data
    return response.status, json.loads(data)


def _auth(alice) -> dict:
    return {"Authorization": f"Bearer {alice['agent_key']}"}


def test_a_commit_over_http_lands_and_answers_every_batch(live_server, alice):
    topic = topic_create(cluster=alice["cluster"], name="orders", num_partitions=2)
    tid = str(topic.id)
    body = {
        "file_key": f"{alice['cluster'].public_id}/segments/http.seg",
        "size": 300,
        "batches": [
            batch(tid, 0, 4, pos=0, batch_count=2),
            batch(tid, 1, 1, pos=100),
            batch(tid, 1, 2, pos=200, producer_id=3, producer_epoch=0, base_sequence=0),
        ],
    }
    status, answer = _call(
        live_server, "/agent/v1/commit", json.dumps(body).encode(), headers=_auth(alice)
    )
    assert status == 200
    assert [(b["error_code"], b["base_offset"]) for b in answer["batches"]] == [
        (0, 0),
        (0, 0),
        (0, 1),
    ]
    # Sent again (an agent that lost the answer): the same answer, nothing stored twice.
    again = _call(live_server, "/agent/v1/commit", json.dumps(body).encode(), headers=_auth(alice))
    assert again == (200, answer)
    assert SegmentFile.objects.filter(cluster=alice["cluster"]).count() == 1


def test_other_calls_are_served_in_threads_with_the_same_answers(live_server, alice):
    topic_create(cluster=alice["cluster"], name="orders", num_partitions=1)
    status, answer = _call(
        live_server, "/agent/v1/topics/list", b'{"names": null}', headers=_auth(alice)
    )
    assert status == 200 and [t["name"] for t in answer["topics"]] == ["orders"]


@pytest.mark.parametrize(
    ("path", "method", "headers", "body", "status"),
    [
        pytest.param("/agent/v1/commit", "GET", None, b"", 405, id="get"),
        pytest.param("/agent/v1/commit", "POST", {}, b"{}", 401, id="no-key"),
        pytest.param("/agent/v1/heartbeat", "POST", {"Authorization": "Bearer x"}, b"{}", 401,
                     id="unknown-key"),
        pytest.param("/agent/v1/commit", "POST", "key", b'{"size": 1', 400, id="not-json"),
        pytest.param("/agent/v1/commit", "POST", "key", b'{"file_key": "x", "size": 1,'
                     b' "batches": []}', 400, id="not-the-clusters-file"),
        pytest.param("/agent/v1/nothing-here", "POST", "key", b"{}", 404, id="unknown-call"),
    ],
)  # fmt: skip
def test_every_error_is_short_json(live_server, alice, path, method, headers, body, status):
    headers = _auth(alice) if headers == "key" else headers
    got, answer = _call(live_server, path, body, method=method, headers=headers)
    assert got == status and set(answer) == {"error"} and answer["error"], answer


def test_a_body_over_the_limit_is_refused_before_it_is_read(live_server, alice):
    parts = urlsplit(live_server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest("POST", "/agent/v1/commit")
    conn.putheader("Authorization", f"Bearer {alice['agent_key']}")
    conn.putheader("Content-Length", str(endpoint.MAX_BODY_BYTES + 1))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413 and "larger than" in json.loads(response.read())["error"]
    conn.close()


def _commit_once(live_server, alice) -> dict:
    """A topic and a commit to it: the agent key is in the web server's cache after it.
    Returns the commit's body with the file key of a next commit."""
    topic = topic_create(cluster=alice["cluster"], name="orders", num_partitions=1)
    body = {
        "file_key": f"{alice['cluster'].public_id}/segments/a.seg",
        "size": 100,
        "batches": [batch(str(topic.id), 0)],
    }
    status, _ = _call(
        live_server, "/agent/v1/commit", json.dumps(body).encode(), headers=_auth(alice)
    )
    assert status == 200
    return {**body, "file_key": body["file_key"].replace("a.seg", "b.seg")}


def test_a_deleted_clusters_key_is_refused_at_once_on_every_call(live_server, alice):
    """The key cache (5 s) knew the cluster; right after its deletion a commit with its key
    is a 401 (it was a 500: the file's row named a cluster that is gone), and so is every
    other call — the deletion reaches every web process's cache through PostgreSQL."""
    body = _commit_once(live_server, alice)
    cluster_delete(cluster=alice["cluster"], confirm_name=alice["cluster"].name)
    # A call that only reads first: nothing but the notification can tell it (it answered
    # the deleted cluster's empty topic list for up to 5 s). The notification is delivered
    # after the deletion commits, so a call sent in the same millisecond may still be
    # answered from the cache (with nothing: the cluster's rows are gone) — within a
    # second, never the cache's 5 s.
    deadline = time.monotonic() + 1.0
    while (
        answer := _call(
            live_server, "/agent/v1/topics/list", b'{"names": null}', headers=_auth(alice)
        )
    ) != endpoint.NO_KEY and time.monotonic() < deadline:
        assert answer == (200, {"topics": []})  # never anything of the deleted cluster
        time.sleep(0.01)
    assert answer == endpoint.NO_KEY
    status, answer = _call(
        live_server, "/agent/v1/commit", json.dumps(body).encode(), headers=_auth(alice)
    )
    assert (status, answer) == endpoint.NO_KEY
    heartbeat = json.dumps({"agent_id": "a1", "host": "127.0.0.1", "port": 9092}).encode()
    assert _call(live_server, "/agent/v1/heartbeat", heartbeat, headers=_auth(alice)) == (
        endpoint.NO_KEY
    )


def test_a_commit_racing_the_deletion_is_refused_not_failed(live_server, alice):
    """Even before the notification arrives (another process's cache, say), a commit whose
    cluster is gone is a 401: its file's row is refused by the cluster's foreign key."""
    body = _commit_once(live_server, alice)
    cluster = alice["cluster"]
    endpoint_cache = dict(endpoint._key_cache)  # what this process knew before
    cluster_delete(cluster=cluster, confirm_name=cluster.name)
    endpoint._key_cache.update(endpoint_cache)  # as a process the notification missed
    assert (
        _call(live_server, "/agent/v1/commit", json.dumps(body).encode(), headers=_auth(alice))
        == endpoint.NO_KEY
    )


def test_commit_files_over_http_goes_through_the_commit_pipeline_in_order(live_server, alice):
    topic = topic_create(cluster=alice["cluster"], name="journaled", num_partitions=1)
    tid = str(topic.id)
    prefix = f"{alice['cluster'].public_id}/journal/agt-a/b1"
    files = [
        {
            "file_key": f"{prefix}/{n:012d}.seg",
            "size": 100,
            "batches": [batch(tid, 0, 3, producer_id=5, producer_epoch=0, base_sequence=3 * n)],
        }
        for n in range(5)
    ]
    body = json.dumps({"files": files}).encode()
    status, answer = _call(live_server, "/agent/v1/commit-files", body, headers=_auth(alice))
    assert status == 200
    offsets = [
        (f["batches"][0]["error_code"], f["batches"][0]["base_offset"]) for f in answer["files"]
    ]
    assert offsets == [(0, 0), (0, 3), (0, 6), (0, 9), (0, 12)]
    again = _call(live_server, "/agent/v1/commit-files", body, headers=_auth(alice))
    assert again == (200, answer)
    assert SegmentFile.objects.filter(cluster=alice["cluster"]).count() == 5
