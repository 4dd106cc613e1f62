"""The fast road for simple expressions never disagrees with CEL: over generated
expressions and values, whenever it gives a result, CEL gives the same one (same value,
same types); and an expression's evaluator (fast road, else CEL) gives what CEL gives,
error included."""

import math
import warnings

import cel
import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.pipelines import InRecord
from core.pipelines.expressions import Expression
from core.pipelines.fastpath import Fallback, compile_fast
from core.pipelines.processors import _VARIABLES, Flow, evaluator

FIELDS = ["a", "b", "s", "t", "f", "n", "l", "m", "big", "zz"]

scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-5, max_value=5),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.0, -0.0, 1.5, 2.0]),
    st.text(max_size=6),
    st.sampled_from(["", "a", "ab", "é", "eu"]),
    st.booleans(),
    st.none(),
)
values = st.fixed_dictionaries(
    {
        "a": st.integers(min_value=-20, max_value=20),
        "b": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "s": st.sampled_from(["", "a", "ab", "eu", "us", "é"]),
        "t": st.text(max_size=5),
        "f": st.floats(allow_nan=False, allow_infinity=False, width=64),
        "n": st.none(),
        "l": st.lists(scalars, max_size=3),
        "m": st.dictionaries(st.sampled_from(["x", "y"]), scalars, max_size=2),
        "big": st.sampled_from([2**63, 2**64 + 1, -(2**63) - 1]),
    },
    optional={"zz": scalars},
)

literals = st.one_of(
    st.integers(min_value=-3, max_value=10).map(str),
    st.sampled_from(["0", "1", "9223372036854775807", "1.5", "0.0", "2e3", "-2.5"]),
    st.sampled_from(["'a'", '"eu"', "''", "'é'", "true", "false", "null"]),
)
leaves = st.one_of(
    st.sampled_from([f"value.{f}" for f in FIELDS] + ['value["a"]', "value.m.x", "value"]),
    st.sampled_from(["key", "topic", "partition", "offset", "timestamp"]),
    literals,
)


def _extend(inner):
    binary = st.tuples(
        inner,
        st.sampled_from(
            ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", " in "]
        ),
        inner,
    ).map(lambda t: f"({t[0]} {t[1].strip()} {t[2]})")
    return st.one_of(
        binary,
        inner.map(lambda e: f"!{e}"),
        inner.map(lambda e: f"-{e}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        st.lists(inner, max_size=3).map(lambda items: f"[{', '.join(items)}]"),
        st.tuples(inner, inner).map(lambda t: f'{{"k": {t[0]}, "j": {t[1]}}}'),
        st.sampled_from(["has(value.zz)", "has(value.m.x)", "has(value.s)"]),
        inner.map(lambda e: f"size({e})"),
        st.tuples(inner, st.sampled_from(["startsWith", "endsWith", "contains"]), inner).map(
            lambda t: f"{t[0]}.{t[1]}({t[2]})"
        ),
    )


expressions = st.recursive(leaves, _extend, max_leaves=6)
warnings.filterwarnings("ignore", message="Generating overly large repr")


def same(a, b) -> bool:
    """Equal values of the same types all the way down (1 and 1.0 differ; -0.0 is 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def flow_of(value, lazy: bool) -> Flow:
    flow = Flow(InRecord("in", 2, 40, 1_700_000_000_000, b"k1", None))
    if lazy:  # as parse_json leaves it: top-level fields still JSON text
        flow.value = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode(msgspec.json.encode(value))
    else:
        flow.value = msgspec.json.decode(msgspec.json.encode(value))
    return flow


def by_cel(source: str, value):
    activation = {
        "value": value,
        "key": "k1",
        "topic": "in",
        "partition": 2,
        "offset": 40,
        "timestamp": 1_700_000_000_000,
    }
    try:
        return True, cel.compile(source).execute(activation)
    except Exception as exc:
        return False, type(exc)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions, values, st.booleans())
def test_the_fast_road_agrees_with_cel(source, value, lazy):
    try:
        cel.compile(source)
    except ValueError:
        return  # not CEL at all
    fast = compile_fast(source, _VARIABLES)
    plain = msgspec.json.decode(msgspec.json.encode(value))
    ok, expected = by_cel(source, plain)
    if fast is not None:
        try:
            got = fast(flow_of(value, lazy))
        except Fallback:
            pass
        else:
            assert ok, f"{source}: fast gave {got!r}, CEL failed with {expected}"
            assert same(got, expected), f"{source}: fast {got!r} != CEL {expected!r}"


@settings(max_examples=150, deadline=None)
@given(expressions, values)
def test_an_evaluator_gives_what_cel_gives(source, value):
    try:
        expression = Expression(source)
    except Exception:
        return
    plain = msgspec.json.decode(msgspec.json.encode(value))
    ok, expected = by_cel(source, plain)
    run = evaluator(expression)
    try:
        got = run(flow_of(value, lazy=True))
    except Exception as exc:
        assert not ok, f"{source}: evaluator failed ({exc!r}), CEL gave {expected!r}"
    else:
        assert ok and same(got, expected), f"{source}: {got!r} != CEL {expected!r}"


def test_common_pipeline_expressions_take_the_fast_road():
    for source in [
        'value.amount > 10 && value.status != "cancelled"',
        "value.amount * value.quantity",
        '{"id": value.id, "total": value.amount * 2}',
        'value.region == "eu" ? "eu" : "default"',
        "has(value.user.email) && value.user.email.endsWith('@example.com')",
        "value.tier in ['gold', 'silver']",
    ]:
        assert compile_fast(source, _VARIABLES) is not None, source
    assert compile_fast("value.items.map(i, i.qty)", _VARIABLES) is None
