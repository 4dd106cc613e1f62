"""The console's message browser goes over the channel the agent opens: the control plane
never connects to an address an agent reported, and whatever an agent answers (or does
not) gives the person a clear answer, never a 500.

The agents here speak the browse channel over HTTP to the live web server (uvicorn, the
agent API on its event loop) as `agents.browse_channel` does, answering what each test
needs; `tests/controlplane/browser/test_message_browser.py` has real agent processes."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.factories import make_api_key, make_cluster, make_org
from tests.metadata_store.conftest import AgentApi
from tests.openapi_responses import SchemaCheckedClient
from virtualclusters.browsing import channel

pytestmark = pytest.mark.django_db(transaction=True)


class ConnectionRecorder:
    """A listening socket that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(peer)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def recorder():
    found = ConnectionRecorder()
    yield found
    found.close()


@pytest.fixture
def short_waits(settings):
    """Polls of 2 s and a person's wait of 1 s: the tests' timeouts stay short."""
    settings.FLOE_BROWSE_POLL_S = 2
    settings.FLOE_BROWSE_WAIT_S = 1
    return settings


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _call(url: str, key: str, name: str, body: dict, timeout: float = 10) -> tuple[int, dict]:
    """An agent-API call over HTTP, as an agent makes it."""
    request = urllib.request.Request(
        f"{url}/agent/v1/{name}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class ChannelAgent:
    """One poll of the browse channel in a thread; `answer(request)` makes the body of
    the answer (None: answer nothing)."""

    def __init__(self, url: str, key: str, answer) -> None:
        self.url, self.key, self.answer = url, key, answer
        self.requests: list[dict] = []
        self.answered: list[tuple[int, dict]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        status, polled = _call(self.url, self.key, "browse/poll", {"agent_id": "agt-test"})
        assert status == 200, polled
        request = polled["request"]
        if request is None:
            return
        self.requests.append(request)
        body = self.answer(request)
        if body is not None:
            self.answered.append(_call(self.url, self.key, "browse/answer", body))

    def start(self, cluster_id: str) -> ChannelAgent:
        self.thread.start()
        deadline = time.monotonic() + 5
        while not channel.agents_connected(cluster_id):  # the poll is in place
            assert time.monotonic() < deadline, "the poll never registered"
            time.sleep(0.02)
        return self

    def join(self) -> None:
        self.thread.join(10)
        assert not self.thread.is_alive()


def _page(request: dict, **changes) -> dict:
    page = {
        "topic": request["topic"],
        "partition": request["partition"],
        "log_start_offset": 0,
        "high_watermark": 1,
        "records": [
            {"offset": 0, "timestamp": 1_700_000_000_000, "key": "aw==", "value": "dg==",
             "headers": [["h", "eA=="]]}
        ],
    }  # fmt: skip
    page.update(changes)
    return {"id": request["id"], "agent_id": "agt-test", "page": page}


@pytest.fixture
def browsed():
    """A cluster with a topic, an API key of its organization, and `get()`: the REST
    API's records page of the topic (what the console's page asks the same way)."""
    user, org = make_org("Browsing")
    cluster, key = make_cluster("browsed", org=org)
    AgentApi(key).create_topic("orders")
    api = SchemaCheckedClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    url = f"/api/v1/clusters/{cluster.public_id}/topics/orders/records/"

    class Browsed:
        def get(self):
            return api.get(url, {"limit": 5})

    found = Browsed()
    found.cluster, found.key, found.org, found.user = cluster, key, org, user
    return found


def test_a_phantom_agent_gets_no_request_and_the_browse_says_no_agent_is_connected(
    live_server, browsed, recorder, client
):
    # Agent-key holders report the web server's own port, a port that records
    # connections, and a port nobody listens on, as their agents' HTTP ports.
    for n, port in enumerate([live_server.port, recorder.port, _closed_port()]):
        body = {"agent_id": f"agt-phantom{n}", "host": "127.0.0.1", "port": 9092,
                "http_port": port, "roles": ["produce", "consume"]}  # fmt: skip
        status, _ = _call(live_server.url, browsed.key, "heartbeat", body)
        assert status == 200
    started = time.monotonic()
    response = browsed.get()
    assert response.status_code == 409, response.content
    assert "No live agent of this cluster is connected" in response.json()["error"]
    assert time.monotonic() - started < 1.0  # no wait for nobody
    client.force_login(browsed.user)
    page = client.get(f"/clusters/{browsed.cluster.public_id}/topics/orders/")
    assert page.status_code == 200
    assert "No live agent of this cluster is connected" in page.content.decode()
    time.sleep(0.2)
    assert recorder.accepted == []  # the control plane connected to no reported address


def test_a_page_from_the_agents_long_poll_reaches_the_person(live_server, browsed, short_waits):
    agent = ChannelAgent(live_server.url, browsed.key, _page).start(browsed.cluster.public_id)
    response = browsed.get()
    agent.join()
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["agent"] == "agt-test" and body["records"][0]["headers"] == [["h", "eA=="]]
    assert agent.requests[0]["topic"] == "orders" and agent.requests[0]["limit"] == 5
    assert agent.answered == [(200, {"ok": True})]


@pytest.mark.parametrize(
    "garbage, refused",
    [
        ({"records": [{"offset": 0, "timestamp": 0, "key": "not base64!", "value": None}]},
         "$.records[0].key"),
        ({"high_watermark": 0}, "outside the partition's range"),
        ({"topic": "another"}, "another topic or partition"),
        ({"records": "lots"}, "$.records"),
    ],
)  # fmt: skip
def test_an_agent_answering_garbage_gives_a_clear_502(
    live_server, browsed, short_waits, client, garbage, refused
):
    agent = ChannelAgent(live_server.url, browsed.key, lambda r: _page(r, **garbage))
    agent.start(browsed.cluster.public_id)
    response = browsed.get()
    agent.join()
    assert response.status_code == 502, response.content
    assert "The agent's answer was refused" in response.json()["error"]
    assert refused in response.json()["error"]
    assert agent.answered[0][0] == 400 and refused in agent.answered[0][1]["error"]


def test_an_answer_larger_than_the_bound_is_refused(live_server, browsed, short_waits):
    def huge(request):
        record = {"offset": 0, "timestamp": 0, "key": None, "value": "QUFB" * 600_000}
        return _page(request, records=[record] * 4)  # ~9.6 MB

    agent = ChannelAgent(live_server.url, browsed.key, huge).start(browsed.cluster.public_id)
    response = browsed.get()
    agent.join()
    assert response.status_code == 502, response.content
    assert "larger than 8388608 bytes" in response.json()["error"]


def test_an_agent_that_answers_nothing_gives_a_clear_504_and_the_console_page_says_so(
    live_server, browsed, short_waits, client
):
    agent = ChannelAgent(live_server.url, browsed.key, lambda request: None)
    agent.start(browsed.cluster.public_id)
    response = browsed.get()
    agent.join()
    assert response.status_code == 504, response.content
    assert "took the request but did not answer within 1 s" in response.json()["error"]
    # The console's page: the topic is shown, the browser says what went wrong.
    client.force_login(browsed.user)
    agent = ChannelAgent(live_server.url, browsed.key, lambda request: None)
    agent.start(browsed.cluster.public_id)
    page = client.get(f"/clusters/{browsed.cluster.public_id}/topics/orders/")
    agent.join()
    assert page.status_code == 504
    assert "did not answer within 1 s" in page.content.decode()


def test_an_agent_error_and_an_unknown_topic_are_told_as_such(live_server, browsed, short_waits):
    for answer, status, text in [
        ({"error": "the bucket said 403", "not_found": False}, 502, "the bucket said 403"),
        ({"error": "no topic 'orders'", "not_found": True}, 404, "Not found"),
    ]:
        agent = ChannelAgent(
            live_server.url, browsed.key, lambda r, answer=answer: {"id": r["id"], **answer}
        ).start(browsed.cluster.public_id)
        response = browsed.get()
        agent.join()
        assert response.status_code == status and text in response.content.decode()


def test_an_answer_to_another_clusters_request_is_refused(live_server, browsed, short_waits):
    _, other_key = make_cluster("other", org=browsed.org)
    stolen = []

    def answer_as_the_other_cluster(request):
        stolen.append(_call(live_server.url, other_key, "browse/answer", _page(request)))
        return _page(request, records=[])  # then the real answer

    agent = ChannelAgent(live_server.url, browsed.key, answer_as_the_other_cluster)
    agent.start(browsed.cluster.public_id)
    response = browsed.get()
    agent.join()
    assert stolen[0][0] == 404 and "no browse request" in stolen[0][1]["error"]
    assert response.status_code == 200 and response.json()["records"] == []
    # And an answer after the person stopped waiting finds nobody.
    assert _call(live_server.url, browsed.key, "browse/answer", _page(agent.requests[0]))[0] == 404


def test_the_long_poll_returns_empty_after_its_wait(live_server, browsed, short_waits):
    started = time.monotonic()
    status, answer = _call(live_server.url, browsed.key, "browse/poll", {"agent_id": "agt-idle"})
    assert (status, answer) == (200, {"request": None})
    assert 1.9 < time.monotonic() - started < 5
    assert _call(live_server.url, "wrong-key", "browse/poll", {"agent_id": "agt-x"})[0] == 401


def test_with_redis_out_of_reach_the_browse_and_the_poll_say_so(live_server, browsed, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    response = browsed.get()
    assert response.status_code == 503, response.content
    assert "The browse channel is unavailable" in response.json()["error"]
    status, answer = _call(live_server.url, browsed.key, "browse/poll", {"agent_id": "agt-x"})
    assert status == 503 and "browse channel is unavailable" in answer["error"]


def test_an_agent_that_hangs_up_its_poll_is_no_longer_connected(live_server, browsed):
    body = json.dumps({"agent_id": "agt-gone"}).encode()
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /agent/v1/browse/poll HTTP/1.1\r\nHost: localhost\r\n"
            + f"Authorization: Bearer {browsed.key}\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        deadline = time.monotonic() + 5
        while not channel.agents_connected(browsed.cluster.public_id):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    deadline = time.monotonic() + 2  # closed: the poll leaves at once, not in 35 s
    while channel.agents_connected(browsed.cluster.public_id):
        assert time.monotonic() < deadline, "the hung-up poll still counts"
        time.sleep(0.02)
    assert browsed.get().status_code == 409  # said at once, not after a wait
