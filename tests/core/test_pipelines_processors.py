"""The processors, each over records: what comes out, what is filtered, which errors."""

import pytest

from core.pipelines import DEAD_LETTER, Emit, InRecord, RecordError, compile_spec, parse_config

OUTPUTS = "outputs:\n  default: {kafka: {topic: out}}\n  eu: {kafka: {topic: out-eu}}\n"


def pipeline(processors: str, outputs: str = OUTPUTS, **kwargs):
    text = f"input: {{kafka: {{topics: [in]}}}}\nprocessors:\n{processors}{outputs}"
    return compile_spec(parse_config(text), **kwargs)


def record(value, key=b"k", offset=0, ts=1_000, headers=()):
    return InRecord("in", 0, offset, ts, key, value, headers)


def test_parse_remove_map_encode():
    p = pipeline(
        "  - parse_json: {}\n"
        "  - remove: [password, user.ssn]\n"
        '  - map: \'{"id": value.id, "user": value.user, "twice": value.amount * 2}\'\n'
        "  - encode_json: {}\n"
    )
    value = b'{"id": 7, "amount": 21, "password": "x", "user": {"name": "a", "ssn": "1"}}'
    assert p.process(record(value)) == [
        Emit("default", b"k", b'{"id":7,"twice":42,"user":{"name":"a"}}', (), 1_000)
    ]


def test_filter_keeps_and_drops():
    p = pipeline("  - parse_json: {}\n  - filter: 'value.amount > 0'\n")
    assert p.process(record(b'{"amount": 0}')) == []
    [kept] = p.process(record(b'{"amount": 5}'))
    assert kept.value == b'{"amount":5}'


def test_route_to_two_outputs():
    p = pipeline(
        '  - parse_json: {}\n  - route: \'value.region == "eu" ? ["eu", "default"] : "default"\'\n'
    )
    assert [e.output for e in p.process(record(b'{"region": "eu"}'))] == ["eu", "default"]
    assert [e.output for e in p.process(record(b'{"region": "us"}'))] == ["default"]


def test_a_broken_record_names_its_processor():
    p = pipeline("  - parse_json: {}\n  - filter: 'value.amount > 0'\n")
    with pytest.raises(RecordError) as caught:
        p.process(record(b"not json"))
    assert caught.value.processor == 0
    assert caught.value.message.startswith("processors[0] (parse_json): the value is not JSON")
    with pytest.raises(RecordError) as caught:
        p.process(record(b'{"other": 1}'))
    assert caught.value.processor == 1
    assert caught.value.message == "processors[1] (filter): no such key: amount"


def test_a_dead_letter_record_keeps_the_record_and_says_why():
    p = pipeline("  - parse_json: {}\n")
    rec = InRecord("in", 3, 42, 5, b"k", b"{bad", (("trace", b"t1"), ("none", None)))
    [err] = p.process_batch([rec])
    assert isinstance(err, RecordError)
    dead = p.dead_letter_record(rec, err)
    assert (dead.output, dead.key, dead.value, dead.timestamp_ms) == (DEAD_LETTER, b"k", b"{bad", 5)
    assert dead.headers == (
        ("trace", b"t1"),
        ("none", b""),
        ("floe.error", err.message.encode()),
        ("floe.error.processor", b"0"),
        ("floe.source.topic", b"in"),
        ("floe.source.partition", b"3"),
        ("floe.source.offset", b"42"),
    )
