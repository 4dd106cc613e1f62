"""A pipeline's configuration: the spec it gives, and every problem at its line and
column (YAML and JSON)."""

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.pipelines import (
    BucketOutput,
    ConfigError,
    HttpInput,
    HttpOutput,
    KafkaInput,
    KafkaOutput,
    parse_config,
)

GOOD = """\
input:
  kafka:
    topics: [orders]
    group: orders-router
processors:
  - parse_json: {}
  - remove: [password, ssn]
  - set:
      total: 'value.amount * 2'
  - filter: 'value.amount > 0'
  - route:
      cases:
        - when: 'value.region == "eu"'
          output: eu
  - encode_json: {}
outputs:
  default: {kafka: {topic: orders-clean}}
  eu:      {kafka: {topic: orders-eu}}
  files:   {bucket: {prefix: "exports/orders/", max_records: 500}}
  hook:    {http: {url: "http://127.0.0.1:9000/in", timeout_seconds: 2}}
errors:
  dead_letter: {topic: orders-dlq}
"""


def problems(text):
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return [(p.line, p.column, p.path, p.message) for p in caught.value.problems]


def test_it_reads_a_whole_configuration():
    spec = parse_config(GOOD)
    assert spec.input == KafkaInput(("orders",), "orders-router", "earliest")
    assert [p.kind for p in spec.processors] == [
        "parse_json",
        "remove",
        "set",
        "filter",
        "route",
        "encode_json",
    ]
    assert spec.outputs == {
        "default": KafkaOutput("orders-clean"),
        "eu": KafkaOutput("orders-eu"),
        "files": BucketOutput("exports/orders/", 500, 60.0),
        "hook": HttpOutput("http://127.0.0.1:9000/in", 2.0),
    }
    assert spec.dead_letter == KafkaOutput("orders-dlq")
    assert spec.topics_read() == {"orders"}
    assert spec.topics_written() == {"orders-clean", "orders-eu", "orders-dlq"}


def test_the_same_pipeline_in_json_has_the_same_canonical_form():
    spec = parse_config(GOOD)
    again = parse_config(json.dumps(spec.canonical(), indent=2))
    assert again.canonical() == spec.canonical()
    assert json.loads(json.dumps(spec.canonical())) == spec.canonical()


def test_an_http_input_and_defaults():
    spec = parse_config("input: {http: {}}\noutputs: {default: {kafka: {topic: t}}}\n")
    assert spec.input == HttpInput()
    assert spec.processors == ()
    assert spec.dead_letter is None
    assert spec.topics_read() == set()


def test_a_spec_knows_where_each_node_it_read_stands():
    def at(spec, path):
        line, column = spec.position_of(path)
        return spec.source.split("\n")[line - 1][column - 1 :]

    spec = parse_config(GOOD)
    assert spec.position_of("input.kafka.topics[0]") == (3, 14)
    assert at(spec, "input.kafka.topics[0]").startswith("orders]")
    assert at(spec, "outputs.eu.kafka.topic").startswith("orders-eu}")
    assert at(spec, "errors.dead_letter.topic").startswith("orders-dlq}")
    assert at(spec, "processors[3].filter").startswith("'value.amount > 0'")
    # A path the reader never reached is at its nearest ancestor's place.
    assert at(spec, "outputs.eu.kafka.partitions[2]").startswith("{topic: orders-eu}")
    assert spec.position_of("nowhere") == (1, 1)
    # JSON with tabs: the same columns as the text (a tab is one column).
    tabbed = parse_config(
        '{\n\t"input": {"kafka": {"topics": ["a"]}},\n\t"outputs": {"default": {"kafka": '
        '{"topic": "b"}}}}'
    )
    assert at(tabbed, "input.kafka.topics[0]").startswith('"a"]')
    assert at(tabbed, "outputs.default.kafka.topic").startswith('"b"}')


def test_every_problem_is_reported_at_its_line_and_column():
    text = """\
input:
  kafka:
    topics: []
    grop: x
processors:
  - parse_json: {}
  - filter: 'value.amount >'
  - map: 1
  - route: {cases: [{when: 'true', output: nowhere}]}
  - frobnicate: {}
outputs:
  default: {kafka: {topic: "bad topic"}}
"""
    found = problems(text)
    assert [(line, column, path) for line, column, path, _ in found] == [
        (3, 13, "input.kafka.topics"),
        (4, 5, "input.kafka.grop"),
        (7, 28, "processors[1].filter"),
        (8, 10, "processors[2].map"),
        (9, 44, "processors[3].route.cases[0].output"),
        (10, 5, "processors[4]"),
        (12, 28, "outputs.default.kafka.topic"),
    ]
    messages = [m for *_, m in found]
    assert "at least one topic" in messages[0]
    assert "unknown key 'grop'" in messages[1]
    assert messages[2].startswith("CEL: Syntax error")
    assert "must be a string" in messages[3]
    assert "no output is named 'nowhere'" in messages[4]
    assert "unknown processor 'frobnicate'" in messages[5]
    assert "not a topic name" in messages[6]


def test_a_json_configuration_has_its_problems_at_their_line_and_column():
    text = (
        '{\n  "input": {"kafka": {"topics": ["a"]}},\n'
        '  "processors": [{"filter": "value.x +"}],\n'
        '  "outputs": {"default": {"kafka": {"topic": "b"}}}\n}'
    )
    [(line, column, path, message)] = problems(text)
    assert (line, column, path) == (3, 39, "processors[0].filter")
    assert message.startswith("CEL: Syntax error")


def test_an_expression_in_a_block_scalar_has_its_problem_at_its_own_line():
    text = (
        "input: {kafka: {topics: [in]}}\n"
        "processors:\n"
        "  - filter: |\n"
        "      value.a > 1 &&\n"
        "        value.b > ) 2\n"
        "outputs: {default: {kafka: {topic: o}}}\n"
    )
    [(line, column, path, message)] = problems(text)
    assert (line, column, path) == (5, 19, "processors[0].filter")  # the ")"
    [(line, column, _, _)] = problems(text.replace(" ) 2", ""))
    assert (line, column) == (5, 18)  # just after the last character, not the next line


def test_json_syntax_errors_are_json_s():
    assert problems('{"input": {"kafka": {"topics": ["a"]}},\n "outputs": }') == [
        (2, 13, "", "JSON: Expecting value")
    ]


def test_yaml_syntax_errors_are_at_their_place():
    [(line, column, path, message)] = problems("input:\n  kafka: x: y\n")
    assert (line, column, path) == (2, 11, "")
    assert message.startswith("YAML: mapping values are not allowed")


keys = st.sampled_from(
    ["input", "processors", "outputs", "errors", "kafka", "http", "bucket", "topics", "topic"]
    + ["group", "start", "prefix", "max_records", "url", "dead_letter", "default", "eu", "map"]
    + ["parse_json", "set", "remove", "filter", "route", "cases", "when", "output", "dedupe"]
    + ["rate_limit", "records_per_second", "key", "window_seconds", "x"]
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["orders", "value.a > 1", "value.a >", "default", "eu", "{}", "[]"]),
)
documents = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents, st.booleans())
def test_any_document_gives_a_spec_or_problems_with_positions(document, as_json):
    try:
        text = json.dumps(document) if as_json else yaml.safe_dump(document)
    except ValueError:
        return  # NaN in JSON
    try:
        parse_config(text)
    except ConfigError as exc:
        assert exc.problems
        assert all(p.line >= 1 and p.column >= 1 for p in exc.problems)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_a_spec_or_problems(text):
    try:
        parse_config(text)
    except ConfigError as exc:
        assert exc.problems
