"""The pipelines role's pure parts: where its clients connect, what a POSTed body holds,
how bucket files are cut and named, and how an HTTP output retries."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from agents.pipeline_runner import bootstrap_settings, parse_posted
from agents.pipeline_sinks import BucketFiles, HttpPoster, OutputError, json_line
from agents.pipeline_worker import kafka_login
from core.storage import MemoryStore

OWN = [
    ("PLAINTEXT", "PLAINTEXT", "10.0.0.1", 9092),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "10.0.0.1", 9093),
]
LIVE = [
    {
        "agent_id": "b",
        "listeners": [
            {"name": "PLAINTEXT", "protocol": "PLAINTEXT", "host": "10.0.0.2", "port": 9092},
            {
                "name": "SASL_PLAINTEXT",
                "protocol": "SASL_PLAINTEXT",
                "host": "10.0.0.2",
                "port": 9093,
            },
        ],
    }
]


def test_clients_with_credentials_use_a_sasl_listener_own_first():
    settings = bootstrap_settings(OWN, LIVE, sasl=True)
    assert settings == {
        "bootstrap.servers": "10.0.0.1:9093,10.0.0.2:9093",
        "security.protocol": "sasl_plaintext",
    }
    assert bootstrap_settings(OWN, LIVE, sasl=False)["bootstrap.servers"] == (
        "10.0.0.1:9092,10.0.0.2:9092"
    )


def test_an_agent_without_sasl_listeners_is_reached_without_logging_in():
    settings = bootstrap_settings(OWN[:1], [], sasl=True)
    assert settings["security.protocol"] == "plaintext"
    login = kafka_login({"username": "pipeline-a", "password": "pw"}, "plaintext")
    assert login == {}
    login = kafka_login(
        {"mechanism": "SCRAM-SHA-512", "username": "pipeline-a", "password": "pw"}, "sasl_ssl"
    )
    assert login == {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "pipeline-a",
        "sasl.password": "pw",
    }


def test_posted_bodies_are_json_arrays_or_json_lines():
    assert parse_posted(b'[{"a": 1}, 2, "x"]', "application/json") == [b'{"a":1}', b"2", b'"x"']
    assert parse_posted(b'{"a": 1}\n\n{"b": 2}\n', "") == [b'{"a": 1}', b'{"b": 2}']
    assert parse_posted(b"  ", "") == []
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        parse_posted(b'{"a": 1}\n{oops\n', "")
    with pytest.raises(ValueError, match="not a JSON array"):
        parse_posted(b"[1, 2", "")


def test_a_json_line_keeps_the_value_as_json_or_text_or_base64():
    line = json.loads(
        json_line(
            topic="t",
            partition=1,
            offset=7,
            timestamp_ms=5,
            key=b"k",
            value=b'{"a": [1]}',
            headers=(("h", b"v"), ("bin", b"\xff")),
        )
    )
    assert line == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp": 5,
        "key": "k",
        "headers": {"h": "v", "bin": {"base64": "/w=="}},
        "value": {"a": [1]},
    }
    text = json_line(
        topic="t", partition=0, offset=0, timestamp_ms=0, key=None, value=b"plain", headers=()
    )
    assert json.loads(text)["value"] == "plain" and text.endswith(b"\n")


def test_bucket_files_are_cut_by_count_and_age_and_named_by_their_first_offset():
    store = MemoryStore("pipeline-units")
    now = [0.0]
    files = BucketFiles(
        store, prefix="out/", pipeline="p", max_records=3, max_age_s=10, clock=lambda: now[0]
    )
    for offset in (5, 6, 8):
        files.add("t", 0, offset, b"%d\n" % offset)
    files.add("t", 0, 9, b"9\n")
    assert files.pending_from("t", 0) == 9
    assert store.get("out/p/t/0/00000000000000000005.jsonl") == b"5\n6\n8\n"
    assert not files.flush_due()
    now[0] = 11.0
    assert files.flush_due()
    assert files.pending_from("t", 0) is None
    assert store.get("out/p/t/0/00000000000000000009.jsonl") == b"9\n"
    # A replay from offset 9 (its commit was lost) writes the same object again.
    files.add("t", 0, 9, b"9\n")
    files.add("t", 0, 10, b"10\n")
    files.flush_all()
    assert store.get("out/p/t/0/00000000000000000009.jsonl") == b"9\n10\n"
    assert sorted(o.key for o in store.list("out/")) == [
        "out/p/t/0/00000000000000000005.jsonl",
        "out/p/t/0/00000000000000000009.jsonl",
    ]


class _Flaky(http.server.BaseHTTPRequestHandler):
    answers: list[int] = []
    seen: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.headers["Floe-Source"], body))
        self.send_response(self.answers.pop(0) if self.answers else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Flaky.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/in"
    server.shutdown()
    server.server_close()


def test_an_http_output_retries_5xx_and_gives_up_on_a_4xx(receiver):
    _Flaky.answers[:] = [503, 500]
    poster = HttpPoster(receiver, timeout_s=2, sleep=lambda s: None)
    poster.post(b"{}", {"Floe-Source": "t/0/1"})
    assert [s for s, _ in _Flaky.seen] == ["t/0/1"] * 3
    _Flaky.answers[:] = [400]
    with pytest.raises(OutputError, match="HTTP 400"):
        poster.post(b"{}", {"Floe-Source": "t/0/2"})
    assert len(_Flaky.seen) == 4
    poster.close()


def test_the_runner_reports_a_configuration_it_cannot_run_and_starts_and_stops_the_others():
    import asyncio

    from agents.pipeline_runner import PipelineRunner

    store = MemoryStore("pipeline-runner-units")
    runner = PipelineRunner(
        None,  # apply() never calls the control plane
        agent_id="agt-u",
        store=store,
        bootstrap=lambda sasl: {"bootstrap.servers": "127.0.0.1:1"},
    )
    landing = "input: {http: {}}\noutputs: {default: {bucket: {prefix: 'in/'}}}\n"
    broken = {
        "id": "pl_b",
        "name": "broken",
        "version": 3,
        "config": "input: [",
        "state": "running",
    }
    posted = {"id": "pl_h", "name": "landing", "version": 1, "config": landing, "state": "running"}

    async def scenario() -> tuple[dict, dict, dict]:
        await runner.apply([broken, posted])
        first = runner.report_body()
        answer = await asyncio.get_running_loop().run_in_executor(
            None, runner.http["pl_h"].handle, [b'{"a":1}', b"2"]
        )
        await runner.apply([])
        return first, answer, runner.report_body()

    first, answer, last = asyncio.run(scenario())
    reports = {r["id"]: r for r in first["pipelines"]}
    assert reports["pl_b"]["state"] == "failing" and reports["pl_b"]["version"] == 3
    assert "invalid pipeline configuration" in reports["pl_b"]["errors"][0]["message"]
    assert reports["pl_h"]["state"] == "running"
    assert answer == {"records": 2, "out": 2, "dead_lettered": 0, "filtered": 0}
    (key,) = [o.key for o in store.list("in/landing/http/")]
    assert [json.loads(line)["value"] for line in store.get(key).splitlines()] == [{"a": 1}, 2]
    assert [(r["id"], r["state"]) for r in last["pipelines"]] == [("pl_h", "stopped")]
