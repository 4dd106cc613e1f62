"""Patterns read alike by ECMA-262 and Python's `re` (core/ecma_regex.py): what is refused
and where, and — against a real ECMA-262 engine (node's RegExp) — that what is accepted
matches the same names once `ecma_compile` has written it for Python."""

from __future__ import annotations

import json
import operator
import re
import subprocess

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.formats import regex_values

from core.ecma_regex import dialect_problem, ecma_compile

# The schema's `format: regex` as the suite's own schema validator reads it.
FORMAT_REGEX = jsonschema_rs.validator_for(
    {"type": "string", "format": "regex"}, validate_formats=True
)


@pytest.mark.parametrize(
    "pattern, position, words",
    [
        ("orders}", 6, "lone '}'"),
        ("a{,3}", 1, "lone '{'"),
        ("(?P<name>a)", 0, "(?P"),
        ("(?<name>a)", 0, "named group"),
        (r"orders\Z", 6, r"\Z"),
        (r"\Aorders", 0, r"\A"),
        ("a(?i)b", 1, "inline flags"),
        ("(?i)orders", 0, "inline flags"),
        ("(?i:orders)", 0, "modifier group"),
        ("a++", 2, "possessive"),
        ("a{1,2}+", 6, "possessive"),
        ("(?>ab)", 0, "atomic"),
        ("(?#note)a", 0, "comment"),
        ("(a)?b\\1", 5, "backreference"),
        (r"a\01", 1, "octal"),
        (r"[\1]", 1, "octal"),
        (r"\U0001F600", 0, r"\U"),
        (r"\a", 0, r"\a"),
        ("[]a]", 1, "opening with ']'"),
        ("[^]a]", 2, "opening with ']'"),
        ("(?=a)*b", 5, "quantified lookaround"),
        ("[a-", 0, "unterminated"),
        ("a\\", 1, "trailing backslash"),
    ],
)
def test_it_refuses_what_the_dialects_read_differently_and_says_where(pattern, position, words):
    problem = dialect_problem(pattern)
    assert problem is not None and problem.position == position, problem
    assert words in problem.reason
    assert str(problem).endswith(f"at position {position}")


ACCEPTED = [
    r"orders-\d{2,}|[{}]x|a\}",
    r"^\w*?\s{1,3}?.$",
    r"(?:eu|us)-[a-z0-9._-]+",
    r"(a)(?=b)(?<=a)(?!c)(?<!d)\b\B",
    r"[\b][\S][^a\S][\s-]\x41\u0041\0\-\/",
    "[a&&b][[a]é",
    "x😀+[😀]",
]


@pytest.mark.filterwarnings("ignore:Possible:FutureWarning")  # Python's re on `[[`, `&&`
@pytest.mark.parametrize("pattern", ACCEPTED)
def test_what_it_accepts_both_dialects_accept(pattern):
    assert dialect_problem(pattern) is None
    assert FORMAT_REGEX.is_valid(pattern)
    re.compile(pattern)
    ecma_compile(pattern)


@settings(max_examples=200, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(regex_values(st.characters(codec="utf-8")))
def test_it_accepts_every_pattern_the_schema_fuzzer_sends_as_a_regex(pattern):
    """schemathesis's own generator for `format: regex` (the API's positive cases)."""
    assert dialect_problem(pattern) is None, (pattern, dialect_problem(pattern))


# --- the same names match, against node's RegExp ----------------------------------------

ATOMS = [".", r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", "a", "é", "٣", "😀", r"\-", r"\x41"]
ATOMS += [r"[\s]", r"[^\s]", r"[\S]", r"[^a\S]", r"[a-c\d]", r"[^\w]", r"[\b]", "(?:a|b)", "[😀]"]
QUANTIFIERS = ["", "*", "+", "?", "{2}", "{1,}", "{0,2}?", "*?"]
# Characters where the dialects' classes part: Unicode digits and letters, ECMA-262's
# extra spaces and line terminators, Python's extra spaces (\x1c-\x1f), a character outside
# the BMP (two UTF-16 units to ECMA-262).
SUBJECT_CHARS = "aAbé٣5_ -\t\n\r\x0b\x1c\x1f\xa0\u2028\ufeff\u3000\x08😀"

pieces = st.builds(operator.add, st.sampled_from(ATOMS), st.sampled_from(QUANTIFIERS))
patterns = st.builds(
    lambda start, body, end: start + body + end,
    st.sampled_from(["", "^"]),
    st.lists(pieces, min_size=1, max_size=4).map("".join),
    st.sampled_from(["", "$", "$\n", "\\b"]),
)


def _node_fullmatches(cases: list[tuple[str, str]]) -> list[bool]:
    script = (
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(cases.map(([p, s]) =>"
        " new RegExp('^(?:' + p + ')$').test(s))));"
    )
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(cases), capture_output=True, text=True,
        timeout=30, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_accepted_patterns_match_the_same_names_as_ecma_262_does():
    cases: list[tuple[str, str]] = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(patterns, st.lists(st.text(SUBJECT_CHARS, max_size=4), min_size=8, max_size=8))
    def collect(pattern, subjects):
        if dialect_problem(pattern) is None:
            cases.extend((pattern, subject) for subject in subjects)

    collect()
    assert len(cases) > 1000
    ecma = _node_fullmatches(cases)
    ours = [ecma_compile(pattern).fullmatch(subject) for pattern, subject in cases]
    differ = [case for case, a, b in zip(cases, ecma, ours, strict=True) if a != b]
    assert not differ, differ[:10]
    # The check can see a difference: Python's own reading parts from ECMA-262's.
    plain = [re.fullmatch(pattern, subject) is not None for pattern, subject in cases]
    assert plain != ecma


@pytest.mark.parametrize(
    "pattern, name, python_alone",
    [
        (r"\d", "٣", True),  # an Arabic-Indic digit: ECMA-262's \d is [0-9]
        (r"\w+", "café", True),
        (r"a\s", "a\ufeff", False),  # ECMA-262's \s holds the byte-order mark
        (r"a\s", "a\x1c", True),  # Python's \s holds the file separator
        ("a.", "a\r", True),  # ECMA-262's . stops at every line terminator
        ("a$\n", "a\n", True),  # ECMA-262's $ is the end, never before a final newline
        ("😀+", "😀😀", True),  # ECMA-262 repeats the second UTF-16 unit only
        ("^.$", "😀", True),  # and its . takes one unit of two
    ],
)
def test_the_compiled_pattern_reads_as_ecma_262_where_python_alone_would_not(
    pattern, name, python_alone
):
    assert (re.fullmatch(pattern, name) is not None) is python_alone
    assert ecma_compile(pattern).fullmatch(name) is not python_alone
