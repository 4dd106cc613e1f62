"""Agent-API fuzzing: thousands of generated requests, with a valid agent key, to every
agent-API call, built from the call's own schema (`endpoint(schema)`) — mostly fitting,
sometimes at or past a bound, sometimes the wrong type — and aimed partly at the
cluster's real topics. Never a server error; afterwards every partition still reads
back from its log start to its high watermark, densely, and no watermark went back."""

from __future__ import annotations

import json
import os

import msgspec.inspect as mi
import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_store.models import Batch, Partition
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db

# FLOE_FUZZ_EXAMPLES raises it for a longer run (the figure in issue 18's closing note).
EXAMPLES = int(os.environ.get("FLOE_FUZZ_EXAMPLES", "300"))
REQUESTS_PER_EXAMPLE = 15  # one request per call, most examples

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _agent_calls() -> dict[str, type]:
    """`/agent/v1/<name>` → the schema its body must fit, for every agent-API call."""
    calls: dict[str, type] = {}

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                schema = getattr(pattern.callback, "schema", None)
                if schema is not None:
                    calls[prefix + str(pattern.pattern)] = schema

    walk(get_resolver().url_patterns, "/")
    return {path: schema for path, schema in calls.items() if path.startswith("/agent/v1/")}


def _int(t: mi.IntType) -> st.SearchStrategy:
    lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -(2**63))
    hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else 2**63 - 1)
    edges = st.sampled_from([lo, hi, lo - 1, hi + 1, 0, -1, 2**64])
    return st.integers(lo, min(hi, lo + 1000)) | st.integers(lo, hi) | edges


def _strategy(t: mi.Type, topic_ids: list[str]) -> st.SearchStrategy:
    """Values that mostly fit `t`; the junk comes from `_value`."""
    if isinstance(t, mi.IntType):
        return _int(t)
    if isinstance(t, mi.StrType):
        longest = t.max_length if t.max_length is not None else 40
        shortest = t.min_length or 0
        fitting = st.text(min_size=shortest, max_size=min(longest, max(shortest, 40)))
        return fitting | st.just("x" * (longest + 1)) | st.just("")
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.FloatType):
        lo = t.ge if t.ge is not None else -1e9
        hi = t.le if t.le is not None else 1e9
        return st.floats(lo, hi, allow_nan=False) | st.sampled_from([lo - 1, hi + 1])
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.UUIDType):
        return st.uuids().map(str) | st.sampled_from(topic_ids) | st.just("not-a-uuid")
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        inner = _value(t.item_type, topic_ids)
        return st.lists(inner, min_size=t.min_length or 0, max_size=min(t.max_length or 4, 4))
    if isinstance(t, mi.DictType):
        keys = st.text(max_size=40)  # JSON object keys are strings, whatever the schema
        return st.dictionaries(keys, _value(t.value_type, topic_ids), max_size=3)
    if isinstance(t, mi.UnionType):
        return st.one_of([_strategy(u, topic_ids) for u in t.types])
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(list(t.values))
    if isinstance(t, mi.EnumType):
        return st.sampled_from([m.value for m in t.cls])
    if isinstance(t, mi.StructType):
        required = {f.encode_name: _value(f.type, topic_ids) for f in t.fields if f.required}
        optional = {f.encode_name: _value(f.type, topic_ids) for f in t.fields if not f.required}
        return st.fixed_dictionaries(required, optional=optional)
    return JSON


def _value(t: mi.Type, topic_ids: list[str]) -> st.SearchStrategy:
    """One value for a field of type `t`: one time in fifteen, something of another type."""
    return st.integers(0, 14).flatmap(lambda n: JSON if n == 0 else _strategy(t, topic_ids))


def _body(schema: type, topic_ids: list[str]) -> st.SearchStrategy:
    fitting = _strategy(mi.type_info(schema), topic_ids)
    mangled = fitting.flatmap(
        lambda body: st.sampled_from(list(body) or ["-"]).map(
            lambda drop: {k: v for k, v in body.items() if k != drop}
        )
    )
    return st.integers(0, 9).flatmap(lambda n: JSON if n == 0 else (mangled if n == 1 else fitting))


def _check_partitions_read_back(agent_api, topic_ids, before_hw) -> None:
    for part in Partition.objects.filter(topic_id__in=topic_ids):
        key = (str(part.topic_id), part.index)
        assert part.high_watermark >= before_hw[key]
        assert 0 <= part.log_start_offset <= part.high_watermark
        runs = list(
            Batch.objects.filter(partition=part)
            .order_by("last_offset")
            .values_list("base_offset", "last_offset")
        )
        if part.log_start_offset < part.high_watermark:
            assert runs and runs[0][0] <= part.log_start_offset
            assert runs[-1][1] == part.high_watermark - 1
            assert all(b == a + 1 for (_, a), (b, _) in zip(runs, runs[1:]))
        plan = agent_api(
            "fetch-plan",
            {
                "partitions": [
                    {"topic_id": key[0], "partition": key[1], "offset": part.log_start_offset}
                ]
            },
        )["partitions"][0]
        assert plan["error_code"] == 0
        if part.log_start_offset < part.high_watermark:
            assert plan["batches"][0]["base_offset"] <= part.log_start_offset


def test_fuzzed_agent_api_calls_never_fail_the_server_and_lose_nothing(agent_api, alice):
    calls = _agent_calls()
    assert len(calls) >= 20, sorted(calls)  # every app's calls, not only the metadata store's
    topic_ids = [agent_api.create_topic(name, 2) for name in ("fuzz-a", "fuzz-b")]
    for tid in topic_ids:
        batches = [batch(tid, p, 50, pos=100 * (2 * i + p)) for i in range(20) for p in (0, 1)]
        agent_api(
            "commit",
            {
                "file_key": f"{alice['cluster'].public_id}/segments/fuzz-{tid}.seg",
                "size": 100 * len(batches),
                "batches": batches,
            },
        )
    before_hw = {
        (str(p.topic_id), p.index): p.high_watermark
        for p in Partition.objects.filter(topic_id__in=topic_ids)
    }
    sent: list[int] = []
    statuses: dict[int, int] = {}
    names = sorted(calls)

    @given(st.lists(st.sampled_from(names), min_size=1, max_size=REQUESTS_PER_EXAMPLE), st.data())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def fuzz(paths, data):
        for path in paths:
            body = data.draw(_body(calls[path], topic_ids), label=path)
            response = agent_api.client.post(
                path,
                data=json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {agent_api.key}",
            )
            sent.append(1)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code < 500, (path, body, response.content[:500])
            assert response["Content-Type"] == "application/json"

    fuzz()
    print(f"{len(sent)} fuzzed agent-API requests over {len(calls)} calls: {statuses}")
    assert len(sent) >= 1000
    _check_partitions_read_back(agent_api, topic_ids, before_hw)
