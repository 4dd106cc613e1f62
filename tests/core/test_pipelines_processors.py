"""The processors, each over records: what comes out, what is filtered, which errors."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def test_set_writes_fields_from_the_value_as_it_was():
    p = pipeline(
        "  - parse_json: {}\n"
        "  - set: {a: 'value.b', b: 'value.a', meta.source: 'topic + \":\" + string(offset)'}\n"
    )
    [out] = p.process(record(b'{"a": 1, "b": 2}', offset=9))
    assert out.value == b'{"a":2,"b":1,"meta":{"source":"in:9"}}'


def test_set_refuses_a_value_that_is_not_structured():
    p = pipeline("  - set: {a: '1'}\n")
    with pytest.raises(RecordError, match=r"set needs a structured value \(parse it first\)"):
        p.process(record(b"raw"))


def test_remove_drops_fields_and_ignores_missing_ones():
    p = pipeline("  - parse_json: {}\n  - remove: [a, b.c, x.y.z]\n")
    [out] = p.process(record(b'{"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]}'))
    assert out.value == b'{"b":{"d":3},"e":[1, 2]}'  # untouched fields keep their text


def test_map_may_give_any_value_and_the_output_is_json():
    p = pipeline("  - parse_json: {}\n  - map: 'value.items.map(i, i.qty * 2)'\n")
    [out] = p.process(record(b'{"items": [{"qty": 1}, {"qty": 4}]}'))
    assert out.value == b"[2,8]"


def test_map_keys_come_out_sorted_whatever_the_evaluator_did():
    p = pipeline('  - parse_json: {}\n  - map: \'{"z": 1, "a": value.m, "k": [value.m]}\'\n')
    [out] = p.process(record(b'{"m": {"y": 1, "b": 2}}'))
    assert out.value == b'{"a":{"b":2,"y":1},"k":[{"b":2,"y":1}],"z":1}'


def test_filter_must_give_a_bool():
    p = pipeline("  - parse_json: {}\n  - filter: 'value.amount'\n")
    with pytest.raises(RecordError, match=r"processors\[1\] \(filter\): the filter gave int"):
        p.process(record(b'{"amount": 3}'))


def test_key_sets_the_record_key():
    p = pipeline("  - parse_json: {}\n  - key: 'value.user'\n")
    assert p.process(record(b'{"user": "ann"}'))[0].key == b"ann"
    assert p.process(record(b'{"user": 12}'))[0].key == b"12"
    assert p.process(record(b'{"user": null}'))[0].key is None
    with pytest.raises(RecordError, match="not a string, bytes or null"):
        p.process(record(b'{"user": [1]}'))


def test_the_variables_an_expression_reads():
    p = pipeline(
        '  - map: \'{"k": key, "t": topic, "p": partition, "o": offset, '
        '"ts": timestamp, "h": headers.trace, "raw": value}\'\n'
    )
    rec = InRecord("in", 4, 17, 123, b"\xff", b"v", (("trace", b"abc"),))
    [out] = p.process(rec)
    assert out.value == b'{"h":"abc","k":"/w==","o":17,"p":4,"raw":"dg==","t":"in","ts":123}'


def test_route_cases_default_and_drop():
    p = pipeline(
        "  - parse_json: {}\n"
        "  - route:\n"
        "      cases:\n"
        "        - {when: 'value.r == \"eu\"', output: eu}\n"
        "        - {when: 'value.r == \"both\"', output: [eu, default]}\n"
        "      default: []\n"
    )
    assert [e.output for e in p.process(record(b'{"r": "eu"}'))] == ["eu"]
    assert [e.output for e in p.process(record(b'{"r": "both"}'))] == ["eu", "default"]
    assert p.process(record(b'{"r": "us"}')) == []


def test_a_route_expression_naming_no_output_is_the_record_s_error():
    p = pipeline("  - parse_json: {}\n  - route: 'value.r'\n")
    with pytest.raises(RecordError, match="the route names no output 'mars'"):
        p.process(record(b'{"r": "mars"}'))


def test_parse_json_of_a_tombstone_is_an_error_and_encode_keeps_null_values_null():
    p = pipeline("  - parse_json: {}\n")
    with pytest.raises(RecordError, match="parse_json reads bytes, the value is null"):
        p.process(record(None))
    assert pipeline("").process(record(None))[0].value is None


def test_process_batch_keeps_each_record_s_outcome_in_place():
    p = pipeline("  - parse_json: {}\n  - filter: 'value.a > 1'\n")
    out = p.process_batch([record(b'{"a": 2}'), record(b"x"), record(b'{"a": 0}')])
    assert [type(o).__name__ for o in out] == ["list", "RecordError", "list"]
    assert len(out[0]) == 1 and out[2] == []


def test_dedupe_drops_a_key_seen_within_the_window_of_record_time():
    p = pipeline(
        "  - parse_json: {}\n  - dedupe: {key: 'value.id', window_seconds: 10, max_keys: 2}\n"
    )
    kept = [
        bool(p.process(record(value, ts=ts)))
        for value, ts in [
            (b'{"id": 1}', 0),
            (b'{"id": 1}', 5_000),  # within 10 s of the first: dropped
            (b'{"id": 2}', 6_000),
            (b'{"id": 1}', 10_000),  # 10 s after the first: kept again
            (b'{"id": 3}', 10_500),
            (b'{"id": 2}', 11_000),  # forgotten: max_keys 2 keeps ids 1 and 3 only
        ]
    ]
    assert kept == [True, False, True, True, True, True]
    assert len(p._steps[1].seen) == 2


def test_rate_limit_says_how_long_to_wait_and_never_sleeps():
    now = [100.0]
    p = pipeline("  - rate_limit: {records_per_second: 10, burst: 5}\n", clock=lambda: now[0])
    assert p.wait_seconds() == 0.0
    for _ in range(5):
        p.process(record(b"v"))
    assert p.wait_seconds() == 0.0
    for _ in range(5):
        p.process(record(b"v"))  # five past the burst: half a second of debt
    assert p.wait_seconds() == pytest.approx(0.5)
    now[0] += 0.3
    assert p.wait_seconds() == pytest.approx(0.2)
    now[0] += 10
    assert p.wait_seconds() == 0.0


class Registry:
    """A schema source over a dict, counting its calls."""

    def __init__(self):
        self.schemas = {}
        self.subjects = {}
        self.calls = 0

    def register(self, subject, schema):
        schema_id = len(self.schemas) + 1
        self.schemas[schema_id] = schema
        self.subjects[subject] = schema_id
        return schema_id

    def schema_by_id(self, id):
        self.calls += 1
        return self.schemas[id]

    def latest(self, subject):
        self.calls += 1
        return self.subjects[subject], self.schemas[self.subjects[subject]]


ORDER = (
    '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},'
    ' {"name": "region", "type": "string"}, {"name": "amount", "type": "double"}]}'
)
SMALL = (
    '{"type": "record", "name": "Small", "fields": [{"name": "id", "type": "long"},'
    ' {"name": "twice", "type": "double"}]}'
)


def test_avro_round_trip_through_a_schema_source():
    registry = Registry()
    registry.register("orders-value", ORDER)
    small_id = registry.register("small-value", SMALL)
    to_avro = pipeline(
        "  - parse_json: {}\n  - encode_avro: {subject: orders-value}\n", schemas=registry
    )
    [framed] = to_avro.process(record(b'{"id": 5, "region": "eu", "amount": 2.5}'))
    assert framed.value[:5] == b"\x00\x00\x00\x00\x01"  # magic byte 0, schema id 1
    back = pipeline(
        "  - parse_avro: {}\n"
        '  - map: \'{"id": value.id, "twice": value.amount * 2.0}\'\n'
        "  - encode_avro: {subject: small-value}\n"
        "  - parse_avro: {}\n"
        "  - encode_json: {}\n",
        schemas=registry,
    )
    [out] = back.process(record(framed.value))
    assert out.value == b'{"id":5,"twice":5.0}'
    calls = registry.calls
    back.process(record(framed.value))
    assert registry.calls == calls  # schemas are cached
    assert small_id == 2


def test_avro_errors_are_the_record_s():
    registry = Registry()
    registry.register("orders-value", ORDER)
    p = pipeline("  - parse_avro: {}\n", schemas=registry)
    with pytest.raises(RecordError, match="not framed with a schema id"):
        p.process(record(b'{"json": 1}'))
    with pytest.raises(RecordError, match="schema id 9"):
        p.process(record(b"\x00\x00\x00\x00\x09abc"))
    enc = pipeline(
        "  - parse_json: {}\n  - encode_avro: {subject: orders-value}\n", schemas=registry
    )
    with pytest.raises(RecordError, match="does not fit subject 'orders-value'"):
        enc.process(record(b'{"id": "five"}'))
    without = pipeline("  - parse_avro: {}\n")
    with pytest.raises(RecordError, match="no schema registry"):
        without.process(record(b"\x00\x00\x00\x00\x01"))


STEPS = [
    "- parse_json: {}",
    "- encode_json: {}",
    "- map: 'value.a'",
    '- map: \'{"x": value.a, "y": value}\'',
    "- set: {a: 'value.b', c.d: '1'}",
    "- remove: [a, b.c]",
    "- filter: 'value.a > 1'",
    "- route: 'value.r'",
    "- route: {cases: [{when: 'value.a == 1', output: eu}], default: []}",
    "- key: 'value.k'",
    "- dedupe: {key: 'value.a', window_seconds: 1}",
    "- map: 'value.l.map(i, i * 2)'",
    "- set: {z: 'headers'}",
    "- filter: 'value.a in [1, 2, \"x\"]'",
]
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=5),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "r", "k", "l"]), inner, max_size=5),
    ),
    max_leaves=12,
)
raw_values = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()), st.binary(max_size=20), st.none()
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(STEPS), max_size=5), st.lists(raw_values, min_size=1, max_size=4))
def test_any_record_through_any_processors_gives_emits_or_its_error(steps, values):
    p = pipeline("".join(f"  {step}\n" for step in steps))
    recs = [record(v, offset=i, headers=(("h", b"x"), ("n", None))) for i, v in enumerate(values)]
    for outcome in p.process_batch(recs):
        if isinstance(outcome, RecordError):
            assert outcome.message and -1 <= outcome.processor < len(steps)
            continue
        for emit in outcome:
            assert emit.output in ("default", "eu")
            assert emit.value is None or type(emit.value) is bytes
            assert emit.key is None or type(emit.key) is bytes


def test_a_record_s_error_survives_pickling():
    import pickle

    err = RecordError("processors[1] (filter): no such key: amount", 1)
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.processor) == (err.message, err.processor)
