"""What a configuration or an expression cannot do: be huge, expand an alias bomb, nest
without end, read a file, loop forever."""

import time

import pytest

from core.pipelines import ConfigError, InRecord, RecordError, compile_spec, parse_config
from core.pipelines.config import MAX_CONFIG_BYTES

HEAD = "input: {kafka: {topics: [in]}}\noutputs: {default: {kafka: {topic: out}}}\n"


def problems(text):
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return [(p.line, p.column, p.path, p.message) for p in caught.value.problems]


def test_a_text_past_256_kib_is_refused_unread():
    text = HEAD + "# " + "x" * MAX_CONFIG_BYTES + "\n"
    [(line, column, path, message)] = problems(text)
    assert (line, column, path) == (1, 1, "")
    assert f"over {MAX_CONFIG_BYTES}" in message


def test_an_alias_bomb_is_refused_at_once():
    # "Billion laughs": 9^12 strings if expanded.
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 12):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    text = HEAD + "bomb:\n  " + "\n  ".join(lines) + "\nprocessors:\n  - remove: *a11\n"
    started = time.monotonic()
    found = problems(text)
    assert time.monotonic() - started < 2
    assert found[0][2:] == (
        "bomb",
        "unknown key 'bomb' (expected one of input, processors, outputs, errors)",
    )
    # The list *a11 names is read once; its items, one node nine times, are refused (at
    # the anchored node, line 14: the composer keeps one node for an anchor and its aliases).
    assert found[1][2:] == ("processors[0].remove[0]", "a field must be a string")
    assert found[2:] == [
        (
            14,
            8,
            f"processors[0].remove[{i}]",
            "YAML aliases are not allowed in a pipeline configuration",
        )
        for i in range(1, 9)
    ]
    # Aliases where the configuration is read are refused, not expanded.
    text = HEAD.replace("[in]", "&t [in]") + "processors:\n  - remove: *t\n"
    assert [m for *_, m in problems(text)] == [
        "YAML aliases are not allowed in a pipeline configuration"
    ]
    [(line, column, path, message)] = problems(
        "input: &i {kafka: {topics: [in]}}\noutputs: {default: {kafka: {topic: out}}}\n"
        "errors: {dead_letter: *i}\n"
    )
    assert (line, path) == (1, "errors.dead_letter")
    assert message == "YAML aliases are not allowed in a pipeline configuration"


def test_more_than_100_processors_are_refused():
    text = HEAD + "processors:\n" + "  - parse_json: {}\n" * 101
    assert problems(text) == [(4, 3, "processors", "more than 100 processors")]


def test_deep_nesting_is_a_problem_not_a_crash():
    assert problems(HEAD + "errors: " + "[" * 5000 + "]" * 5000 + "\n")
    assert problems("[" * 100_000 + "]" * 100_000)
    deep = HEAD + "processors:\n  - map: 'value'\nerrors: " + "{a: " * 40 + "1" + "}" * 40
    assert any("nested deeper" in m or "unknown key" in m for *_, m in problems(deep))


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('open("/etc/passwd")', "unknown function 'open'"),
        ('import("os")', "reserved identifier: import"),
        ('__import__("os").system("id")', "unknown function"),
        ("value.__class__.__mro__", None),  # a field like any other: no such key
        ("while (true) {}", "reserved identifier: while"),
        ("[1, 2].map(x, x) + f(x)", "unknown function 'f'"),
        ("lists.range(1000000000)", "unknown variable 'lists'"),
        (
            "value.items.map(a, value.items.map(b, value.items.map(c, a + b + c)))",
            "macros nested deeper than 2",
        ),
        ("1 + " * 2000 + "1", "longer than 4096"),
    ],
)
def test_an_expression_can_neither_reach_out_nor_loop(expression, message):
    text = HEAD + "processors:\n  - parse_json: {}\n  - map: " + repr(expression) + "\n"
    if message is None:
        compiled = compile_spec(parse_config(text))
        with pytest.raises(RecordError, match="no such key: __class__"):
            compiled.process(InRecord("in", 0, 0, 0, None, b'{"a": 1}'))
        return
    found = problems(text)
    assert any(message in m for *_, m in found), found


def test_growing_a_string_without_bound_is_stopped():
    text = HEAD + "processors:\n  - map: \"'x'" + ".replace('x', 'xxxxxxxxxx')" * 8 + '"\n'
    compiled = compile_spec(parse_config(text))
    started = time.monotonic()
    with pytest.raises(RecordError, match="longer than 1048576 is refused"):
        compiled.process(InRecord("in", 0, 0, 0, None, b""))
    assert time.monotonic() - started < 2


def test_the_deepest_macros_allowed_over_a_large_record_finish():
    items = ", ".join(str(i) for i in range(300))
    text = (
        HEAD
        + "processors:\n  - parse_json: {}\n"
        + "  - map: 'value.items.filter(a, value.items.exists(b, b == a + 1)).size()'\n"
    )
    compiled = compile_spec(parse_config(text))
    started = time.monotonic()
    [out] = compiled.process(InRecord("in", 0, 0, 0, None, f'{{"items": [{items}]}}'.encode()))
    assert out.value == b"299"
    assert time.monotonic() - started < 20
