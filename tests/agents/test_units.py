"""In-process checks of the agent's small parts: flags, the chunk cache, the topic cache."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from agents.chunk_cache import ChunkCache
from agents.config import ConfigError, parse_config
from agents.groups.ring import node_id_for
from agents.topics import DEFAULT_MAX_MESSAGE_BYTES, TopicCache
from agents.zone_cache import ChunkRing, ZoneCache

REQUIRED = ["--control-plane-url", "http://cp:8000/", "--agent-key", "k", "--bucket-url", "mem://b"]


def test_flags_win_over_the_environment_which_wins_over_defaults():
    env = {"FLOE_BATCH_TIMEOUT": "40", "FLOE_ZONE": "eu-1a", "FLOE_KAFKA_PORT": "19092"}
    config = parse_config([*REQUIRED, "--kafka-port", "29092"], env)
    assert config.kafka_port == 29092  # flag
    assert config.batch_timeout_ms == 40  # environment
    assert config.zone == "eu-1a"
    assert config.http_port == 8080 and config.batch_max_bytes == 8 * 1024 * 1024  # defaults
    assert config.control_plane_url == "http://cp:8000"  # trailing slash dropped
    assert config.agent_id.startswith("agt-") and config.host == "127.0.0.1"


def test_every_required_setting_can_come_from_the_environment():
    env = {
        "FLOE_CONTROL_PLANE_URL": "https://cp.example",
        "FLOE_AGENT_KEY": "secret",
        "FLOE_BUCKET_URL": "s3://bucket?region=eu-west-1",
    }
    config = parse_config([], env)
    assert (config.control_plane_url, config.agent_key) == ("https://cp.example", "secret")


def test_binding_all_interfaces_advertises_loopback_unless_told():
    assert parse_config([*REQUIRED, "--host", "0.0.0.0"], {}).advertise_host == "127.0.0.1"
    config = parse_config([*REQUIRED, "--host", "0.0.0.0", "--advertise-host", "agent-1"], {})
    assert config.advertise_host == "agent-1"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"FLOE_BATCH_TIMEOUT": "soon"}, "FLOE_BATCH_TIMEOUT: expected an integer"),
        ({"FLOE_HTTP_PORT": "-1"}, "FLOE_HTTP_PORT: must be at least 0"),
        ({"FLOE_LOG_LEVEL": "LOUD"}, "unknown level"),
    ],
)
def test_bad_environment_values_are_one_line_errors(env, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(REQUIRED, env)


def test_ripcord_is_the_flag_or_the_cluster_setting_last_learned():
    assert parse_config(REQUIRED, {}).ripcord is False
    assert parse_config([*REQUIRED, "--ripcord"], {}).ripcord is True
    assert parse_config(REQUIRED, {"FLOE_RIPCORD": "true"}).ripcord is True
    assert parse_config(REQUIRED, {"FLOE_RIPCORD": "false"}).ripcord is False
    with pytest.raises(ConfigError, match="FLOE_RIPCORD: expected true or false"):
        parse_config(REQUIRED, {"FLOE_RIPCORD": "maybe"})
    config = parse_config(REQUIRED, {})
    config.learned.ripcord = True  # what a heartbeat answer says of the cluster
    assert config.ripcord is True
    flagged = parse_config([*REQUIRED, "--ripcord"], {})
    flagged.learned.ripcord = False  # the cluster's setting never turns the flag off
    assert flagged.ripcord is True


def test_roles_default_to_all_and_take_a_list_of_known_names():
    assert parse_config(REQUIRED, {}).roles == (
        "produce",
        "consume",
        "jobs",
        "schema-registry",
        "pipelines",
    )
    assert parse_config(REQUIRED, {}).schema_registry_port == 8081
    assert parse_config(REQUIRED, {"FLOE_SCHEMA_REGISTRY_PORT": "0"}).schema_registry_port == 0
    assert parse_config(REQUIRED, {}).schema_registry_rate == 100
    with pytest.raises(ConfigError, match="FLOE_SCHEMA_REGISTRY_RATE"):
        parse_config(REQUIRED, {"FLOE_SCHEMA_REGISTRY_RATE": "0"})
    assert parse_config([*REQUIRED, "--roles", "jobs"], {}).roles == ("jobs",)
    assert parse_config(REQUIRED, {"FLOE_ROLES": "consume, produce"}).roles == (
        "produce",
        "consume",
    )
    with pytest.raises(ConfigError, match="roles are a comma-separated list"):
        parse_config([*REQUIRED, "--roles", "proxy"], {})
    config = parse_config(
        [*REQUIRED, "--spark-master", "spark://m:7077"], {"FLOE_JOB_LEASE_S": "30"}
    )
    assert (config.spark_master, config.job_lease_s) == ("spark://m:7077", 30)


def test_node_ids_are_stable_positive_int32s():
    assert node_id_for("agt-1") == node_id_for("agt-1") != node_id_for("agt-2")
    assert all(0 < node_id_for(f"agt-{i}") < 2**31 for i in range(1000))


class _RangeStore:
    """Just what the read path calls on a bucket."""

    def __init__(self, get_range) -> None:
        self.get_range = get_range


def _local_cache(get_range, *, max_bytes: int, chunk_bytes: int = 4 * 1024 * 1024) -> ZoneCache:
    """The read cache of an agent alone in its zone."""
    chunks = ChunkCache(max_bytes=max_bytes, copy_bytes=0, chunk_bytes=chunk_bytes)
    return ZoneCache(_RangeStore(get_range), chunks, ring=ChunkRing("me"), peers=None)


def test_chunk_cache_loads_each_chunk_once_for_concurrent_readers():
    data = bytes(range(256)) * 100  # 25,600 bytes: 7 chunks of 4 KiB
    loads: list[tuple[int, int]] = []
    lock = threading.Lock()

    def get_range(key: str, start: int, length: int) -> bytes:
        with lock:
            loads.append((start, length))
        time.sleep(0.05)  # slow enough that every reader misses at once
        return data[start : start + length]

    async def scenario():
        cache = _local_cache(get_range, max_bytes=1 << 20, chunk_bytes=4096)
        reads = await asyncio.gather(*(cache.read("f", 4000, 200) for _ in range(20)))
        spanning = await cache.read("f", 100, 20_000)
        return cache, reads, spanning

    cache, reads, spanning = asyncio.run(scenario())
    assert all(b"".join(pieces) == data[4000:4200] for pieces in reads)
    assert b"".join(spanning) == data[100:20_100]
    assert sorted(loads) == [(i * 4096, 4096) for i in range(5)]  # each chunk once
    assert cache.chunks.size == 5 * 4096


def test_chunk_cache_is_bounded_by_bytes_and_evicts_least_recently_used():
    data = bytes(40_000)

    async def scenario():
        cache = _local_cache(lambda k, s, n: data[s : s + n], max_bytes=10_000, chunk_bytes=4096)
        for start in (0, 4096, 8192):
            await cache.read("f", start, 10)
        return cache

    cache = asyncio.run(scenario())
    assert cache.chunks.size <= 10_000
    assert list(cache.chunks.owned.chunks) == [("f", 1), ("f", 2)]


def test_a_chunk_read_again_outlives_one_read_once():
    cache = ChunkCache(max_bytes=10, copy_bytes=4, chunk_bytes=4)
    cache.put(("f", 0), b"aaaa", owned=True)
    cache.put(("f", 1), b"bbbb", owned=True)
    assert cache.get(("f", 0)) == b"aaaa"  # now the most recently used
    cache.put(("f", 2), b"cccc", owned=True)  # 12 bytes > 10: the oldest use goes
    assert cache.get(("f", 1)) is None
    assert cache.get(("f", 0)) == b"aaaa" and cache.owned.size == 8
    cache.put(("g", 0), b"too big for copies", owned=False)
    cache.put(("f", 0), b"aaaa", owned=False)  # owned already: no copy
    assert cache.copies.size == 0


def test_chunk_cache_reports_a_range_past_the_end():
    async def scenario():
        cache = _local_cache(lambda k, s, n: bytes(100)[s : s + n], max_bytes=1 << 20)
        cache.insert_file("own", bytes(50))
        return await cache.read("own", 40, 20)

    with pytest.raises(EOFError):
        asyncio.run(scenario())


class FakeTopicsApi:
    def __init__(self, topics: list[dict]):
        self.topics = topics
        self.calls: list[dict] = []

    async def call_with_retries(self, name: str, body: dict, **_) -> dict:
        assert name == "topics/list"
        self.calls.append(body)
        await asyncio.sleep(0.01)
        names = body["names"]
        return {"topics": [t for t in self.topics if names is None or t["name"] in names]}


def test_topic_cache_answers_from_memory_and_refreshes_on_a_partition_miss():
    topic_id = str(uuid.uuid4())
    api = FakeTopicsApi([{"name": "a", "topic_id": topic_id, "partitions": 2, "configs": {}}])

    async def scenario():
        cache = TopicCache(api)  # type: ignore[arg-type]
        first = await asyncio.gather(*(cache.by_names(["a", "missing"]) for _ in range(10)))
        again = await cache.by_names(["a"])
        api.topics[0]["partitions"] = 4  # partitions added through another agent
        grown = await cache.by_names(["a"], need_partition={"a": 3})
        by_id = await cache.by_ids([uuid.UUID(topic_id)])
        return first, again, grown, by_id

    first, again, grown, by_id = asyncio.run(scenario())
    assert first[0]["a"].partitions == 2 and first[0]["missing"] is None
    assert first[0]["a"].max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES
    assert again["a"] is first[0]["a"]
    assert grown["a"].partitions == 4
    assert by_id[uuid.UUID(topic_id)].name == "a"
    # Ten concurrent misses shared one call; the partition miss made a second.
    assert api.calls == [{"names": ["a", "missing"]}, {"names": ["a"]}]


def test_a_handler_bug_is_logged_and_answered_with_unknown_server_error(monkeypatch, caplog):
    from agents import dispatch
    from core.kafka import ApiKey, RequestHeader, decode_response

    async def broken(ctx, header, body):
        raise RuntimeError("a bug in a handler")

    monkeypatch.setitem(dispatch.HANDLERS, ApiKey.INIT_PRODUCER_ID, (broken, 0))
    dispatcher = dispatch.Dispatcher(ctx=None)  # type: ignore[arg-type]
    header = RequestHeader(ApiKey.INIT_PRODUCER_ID, 4, 42, "test")
    body = {"transactional_id": None, "transaction_timeout_ms": 1000}

    answer = asyncio.run(dispatcher.dispatch(header, body))

    correlation, decoded = decode_response(ApiKey.INIT_PRODUCER_ID, 4, answer[4:])
    assert (correlation, decoded["error_code"]) == (42, -1)  # UNKNOWN_SERVER_ERROR
    assert "a bug in a handler" in caplog.text  # with its traceback


def test_an_unreachable_control_plane_gets_a_retriable_error_not_a_failure(monkeypatch):
    from agents import dispatch
    from agents.control_plane import ControlPlaneUnavailable
    from core.kafka import ApiKey, ErrorCode, RequestHeader, decode_response

    async def unreachable(ctx, header, body):
        raise ControlPlaneUnavailable("topics/list: connection refused", outcome_unknown=False)

    monkeypatch.setitem(dispatch.HANDLERS, ApiKey.PRODUCE, (unreachable, 3))
    dispatcher = dispatch.Dispatcher(ctx=None)  # type: ignore[arg-type]
    header = RequestHeader(ApiKey.PRODUCE, 9, 7, "test")
    body = {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b""}]}],
    }
    answer = asyncio.run(dispatcher.dispatch(header, body))
    _, decoded = decode_response(ApiKey.PRODUCE, 9, answer[4:])
    error = decoded["responses"][0]["partition_responses"][0]["error_code"]
    assert error == ErrorCode.KAFKA_STORAGE_ERROR and ErrorCode(error).retriable


def test_partition_offsets_are_answered_only_while_fresh_and_never_move_back(monkeypatch):
    from agents import partition_offsets

    now = [100.0]
    monkeypatch.setattr(partition_offsets.time, "monotonic", lambda: now[0])
    offsets = partition_offsets.PartitionOffsets(max_age_s=1.0)
    assert offsets.fresh("t", 0) is None
    offsets.learn("t", 0, high_watermark=50, log_start=10)
    offsets.committed("t", 0, end=40, log_start=0)  # an older commit's answer
    assert offsets.fresh("t", 0) == (50, 10)
    now[0] += 0.5
    offsets.committed("t", 0, end=60, log_start=10)
    assert offsets.fresh("t", 0) == (60, 10)
    now[0] += 1.01
    assert offsets.fresh("t", 0) is None  # older than max_age_s: ask again
    offsets.learn("t", 0, high_watermark=70, log_start=20)
    offsets.forget("t", 0)
    assert offsets.fresh("t", 0) is None


def test_the_agent_lifts_its_open_file_limit_to_the_hard_limit():
    import resource

    from agents.__main__ import raise_file_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        assert raise_file_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_requests_arriving_while_a_call_is_out_share_the_next_call():
    from agents.coalesced_calls import CoalescedCalls

    class SlowApi:
        def __init__(self) -> None:
            self.calls: list[int] = []
            self.fail = False

        async def call(self, name: str, body: dict) -> dict:
            self.calls.append(len(body["partitions"]))
            await asyncio.sleep(0.05)
            if self.fail:
                raise RuntimeError("control plane down")
            return {"partitions": [{"echo": p["n"]} for p in body["partitions"]]}

    async def scenario() -> None:
        api = SlowApi()
        calls = CoalescedCalls(api, "list-offsets")  # type: ignore[arg-type]
        first = asyncio.ensure_future(calls.ask([{"n": 0}, {"n": 0}]))
        await asyncio.sleep(0.01)  # the first call is out; these wait for the next one
        later = [calls.ask([{"n": i}, {"n": -i}]) for i in range(1, 100)]
        answers = [await first, *await asyncio.gather(*later)]
        assert answers == [[{"echo": i}, {"echo": -i}] for i in range(100)]
        assert api.calls == [2, 198]  # the first at once, the other 99 requests together
        api.fail = True
        failed = await asyncio.gather(
            *(calls.ask([{"n": 1}]) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(f, RuntimeError) for f in failed)

    asyncio.run(scenario())


def _fetch_frame(correlation_id: int, offset: int, client_id: str = "rdkafka") -> bytes:
    from core.kafka import ApiKey, encode_request

    topic = uuid.UUID(int=44)
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset + p,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p in range(3)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return encode_request(ApiKey.FETCH, 13, correlation_id, client_id, body)[4:]


def test_identical_fetches_are_decoded_once_each_with_its_own_correlation_id():
    from agents.fetch_requests import FetchRequests
    from core.kafka import ApiKey, RequestHeader, decode_request, encode_request

    fetches = FetchRequests(max_entries=2)
    first_header, first = fetches.decode(_fetch_frame(7, 100))
    header, body = fetches.decode(_fetch_frame(8, 100))
    assert body is first  # the same offsets: decoded once
    assert (
        header == RequestHeader(ApiKey.FETCH, 13, 8, "rdkafka") and first_header.correlation_id == 7
    )
    assert (header, body) == decode_request(_fetch_frame(8, 100))  # what decoding gives
    moved_header, moved = fetches.decode(_fetch_frame(9, 103))  # other offsets: decoded
    assert moved is not first and moved["topics"][0]["partitions"][0]["fetch_offset"] == 103
    assert fetches.decode(_fetch_frame(10, 100, "other"))[1] is not first  # another client id
    assert len(fetches) == 2  # bounded: the oldest went
    assert fetches.decode(_fetch_frame(11, 100))[1] is not first
    metadata = encode_request(ApiKey.METADATA, 12, 5, "c", {"topics": None})[4:]
    assert fetches.decode(metadata)[0].api_key == ApiKey.METADATA and len(fetches) == 2


def test_gathered_writes_arrive_whole_and_in_order_when_the_socket_takes_only_part():
    import socket

    from agents.server import write_gathered

    async def scenario() -> bytes:
        ours, theirs = socket.socketpair()
        theirs.setblocking(True)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        big = bytes(range(256)) * 32_768  # 8 MiB: more than the socket takes at once
        ready = [b"head-1", big, b"head-2", memoryview(big)[5:].tobytes(), b"end"]
        expected = b"".join(ready)
        write_gathered(transport, ours.fileno(), ready)  # type: ignore[arg-type]
        assert transport.get_write_buffer_size() > 0  # the rest queued in the transport
        write_gathered(transport, ours.fileno(), [b"after"])  # behind what is queued
        got = bytearray()
        while len(got) < len(expected) + 5:
            got += await loop.run_in_executor(None, theirs.recv, 1 << 20)
        transport.close()
        theirs.close()
        assert bytes(got) == expected + b"after"
        return bytes(got)

    asyncio.run(scenario())
