"""Managed pipelines' other outputs and input, with real agents and the control plane's
REST API: a topic landed in the bucket as JSON-lines files (matching the records
exactly, named by partition and first offset), a topic POSTed to an HTTP endpoint (one
POST per record, `Floe-Source` naming it), and records POSTed to an agent's HTTP port
written to a topic before the answer."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.agents.clients import create_topic
from tests.agents.test_pipelines import _api, _pipelines_url, _wait, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


BUCKET_PIPELINE = """
input:
  kafka: {topics: [readings]}
processors:
  - parse_json: {}
  - filter: 'value.ok'
  - remove: [ok]
outputs:
  default: {bucket: {prefix: "exports/readings/", max_records: 300, max_age_seconds: 1}}
"""


def test_a_topic_lands_in_the_bucket_as_json_lines_matching_the_records(agent, cluster, bucket_url):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "readings", 2)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    sent = {}
    for i in range(2000):
        value = {"n": i, "ok": i % 4 != 0, "t": 20.5 + i}
        producer.produce("readings", json.dumps(value).encode(), key=b"k%d" % i, partition=i % 2)
        sent[i] = value
    assert producer.flush(30) == 0
    answer = _api(cluster).post(
        _pipelines_url(cluster),
        {"name": "readings-files", "config": BUCKET_PIPELINE, "state": "running"},
        format="json",
    )
    assert answer.status_code == 201, answer.content

    root = Path(bucket_url.removeprefix("file://")) / "exports" / "readings" / "readings-files"
    expected = {i: {"n": v["n"], "t": v["t"]} for i, v in sent.items() if v["ok"]}

    def lines() -> list[dict]:
        return [
            json.loads(line)
            for path in sorted(root.rglob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]

    _wait(lambda: len(lines()) >= len(expected), 40, "every record in the bucket")
    time.sleep(1.5)  # a record written twice would show now
    found = lines()
    assert len(found) == len(expected)
    assert {line["value"]["n"]: line["value"] for line in found} == expected
    for line in found:
        n = line["value"]["n"]
        assert line["key"] == f"k{n}" and line["topic"] == "readings"
        assert line["partition"] == n % 2
    # Object names: the partition and the first input offset of each file.
    for path in root.rglob("*.jsonl"):
        first = json.loads(path.read_text().splitlines()[0])
        assert path.parent.name == str(first["partition"]) and int(path.stem) == first["offset"]


def test_http_input_takes_json_lines_and_answers_after_the_topic_has_them(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "posted", 1)
    config = """
input: {http: {}}
processors:
  - parse_json: {}
  - set: {seen: 'true'}
outputs:
  default: {kafka: {topic: posted}}
"""
    answer = _api(cluster).post(
        _pipelines_url(cluster),
        {"name": "intake", "config": config, "state": "running"},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    url = f"{a.http_url}/pipelines/v1/intake/records"
    body = b'{"a": 1}\n{"a": 2}\n'

    def post() -> int:
        request = urllib.request.Request(url, data=body, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    _wait(lambda: post() == 200, 20, "the agent to take the pipeline")
    got = read_committed(a.bootstrap, {"posted": 1}, 2, 10)["posted"]
    values = [json.loads(m.value()) for m in got]
    assert values[:2] == [{"a": 1, "seen": True}, {"a": 2, "seen": True}]

    bad = urllib.request.Request(url, data=b"[1, 2", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(bad, timeout=10)
    assert refused.value.code == 400

    # Paused: the agent stops taking its records.
    answer = _api(cluster).post(
        _pipelines_url(cluster) + "intake/state", {"state": "paused"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    _wait(lambda: post() == 404, 20, "the agent to stop the pipeline")


class _Receiver(http.server.BaseHTTPRequestHandler):
    """Takes every POST; the first of each record is answered 503 (the runner retries)."""

    got: list[tuple[str, bytes]] = []
    refused: set[str] = set()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        source = self.headers["Floe-Source"]
        status = 200
        if source not in self.refused:
            self.refused.add(source)
            status = 503
        else:
            self.got.append((source, body))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_topic_is_posted_to_an_http_endpoint_each_record_named_by_its_source(agent, cluster):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        a = agent(cluster.key)
        create_topic(a.bootstrap, "events", 1)
        producer = Producer({"bootstrap.servers": a.bootstrap})
        for i in range(20):
            producer.produce("events", json.dumps({"i": i}).encode())
        assert producer.flush(20) == 0
        config = f"""
input: {{kafka: {{topics: [events]}}}}
processors:
  - parse_json: {{}}
  - set: {{twice: 'value.i * 2'}}
outputs:
  default: {{http: {{url: "http://127.0.0.1:{server.server_address[1]}/in", timeout_seconds: 2}}}}
"""
        answer = _api(cluster).post(
            _pipelines_url(cluster),
            {"name": "events-hook", "config": config, "state": "running"},
            format="json",
        )
        assert answer.status_code == 201, answer.content
        _wait(lambda: len(_Receiver.got) >= 20, 40, "20 records POSTed")
        time.sleep(1)
        sources = [s for s, _ in _Receiver.got]
        assert sorted(sources) == sorted(f"events/0/{i}" for i in range(20))
        assert {json.loads(b)["i"]: json.loads(b)["twice"] for _, b in _Receiver.got} == {
            i: i * 2 for i in range(20)
        }
    finally:
        server.shutdown()
        server.server_close()
