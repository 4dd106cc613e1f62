"""The object-store contract, run against mem://, file:// and s3:// (moto over real HTTP)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from core.storage import ObjectInfo, ObjectNotFound, ObjectStore, StorageError, open_store


@pytest.fixture(params=["mem", "file", "s3"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "mem":
        return f"mem://contract-{uuid.uuid4().hex}"
    if request.param == "file":
        return (tmp_path / "bucket").as_uri()
    base = request.getfixturevalue("moto_s3_url")
    return f"{base}&prefix=t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store(store_url: str) -> ObjectStore:
    return open_store(store_url)


def keys_of(infos) -> list[str]:
    return [info.key for info in infos]


def test_it_returns_what_was_put(store):
    store.put("vci_a/segments/one", b"hello world")
    assert store.get("vci_a/segments/one") == b"hello world"


def test_it_accepts_memoryview_and_bytearray(store):
    payload = bytearray(b"..abcdef..")
    store.put("view", memoryview(payload)[2:8])
    store.put("array", payload)
    assert store.get("view") == b"abcdef"
    assert store.get("array") == b"..abcdef.."


def test_a_put_replaces_the_object(store):
    store.put("k", b"first version")
    store.put("k", b"second")
    assert store.get("k") == b"second"
    assert store.size("k") == 6


def test_it_stores_empty_objects(store):
    store.put("empty", b"")
    assert store.get("empty") == b""
    assert store.size("empty") == 0
    assert store.get_range("empty", 0, 10) == b""
    assert store.get_tail("empty", 10) == (b"", 0)


def test_a_missing_key_raises_object_not_found(store):
    for read in (
        lambda: store.get("nope/missing"),
        lambda: store.get_range("nope/missing", 0, 4),
        lambda: store.get_range("nope/missing", 0, 0),
        lambda: store.get_tail("nope/missing", 4),
        lambda: store.size("nope/missing"),
    ):
        with pytest.raises(ObjectNotFound) as caught:
            read()
        assert caught.value.key == "nope/missing"
        assert isinstance(caught.value, StorageError)


def test_a_folder_like_key_is_not_an_object(store):
    store.put("dir/child", b"x")
    with pytest.raises(ObjectNotFound):
        store.get("dir")


def test_range_reads_are_short_only_at_the_end(store):
    data = bytes(range(100))
    store.put("r", data)
    assert store.get_range("r", 10, 5) == data[10:15]
    assert store.get_range("r", 0, 100) == data
    assert store.get_range("r", 95, 10) == data[95:]
    assert store.get_range("r", 100, 10) == b""
    assert store.get_range("r", 250, 10) == b""
    assert store.get_range("r", 7, 0) == b""
    with pytest.raises(ValueError):
        store.get_range("r", -1, 5)


def test_a_tail_read_returns_the_suffix_and_the_size(store):
    data = bytes(range(50))
    store.put("t", data)
    assert store.get_tail("t", 8) == (data[-8:], 50)
    assert store.get_tail("t", 50) == (data, 50)
    assert store.get_tail("t", 500) == (data, 50)
    assert store.get_tail("t", 0) == (b"", 50)


def test_delete_removes_and_ignores_missing_keys(store):
    store.put("a/b", b"1")
    store.delete("a/b")
    store.delete("a/b")
    store.delete("never/was")
    with pytest.raises(ObjectNotFound):
        store.get("a/b")
    assert list(store.list()) == []


def test_delete_many_removes_every_key_named(store):
    for n in range(5):
        store.put(f"d/{n}", b"x")
    store.delete_many(["d/0", "d/2", "d/4", "d/missing"])
    store.delete_many([])
    assert keys_of(store.list("d/")) == ["d/1", "d/3"]


def test_list_is_sorted_by_key_like_s3(store):
    # "/" sorts after "-" and ".": a folder-by-folder walk must still give byte order.
    keys = ["a/b", "a-c", "a.b", "ab", "a/a/z", "b", "a0"]
    for key in keys:
        store.put(key, key.encode())
    infos = list(store.list())
    assert keys_of(infos) == sorted(keys)
    assert all(info.size == len(info.key) for info in infos)


def test_list_filters_by_prefix_including_part_of_a_segment(store):
    for key in ["vc1/seg/2026/01", "vc1/seg/2026/02", "vc1/segx", "vc1/other", "vc2/seg/1"]:
        store.put(key, b"x")
    assert keys_of(store.list("vc1/seg/")) == ["vc1/seg/2026/01", "vc1/seg/2026/02"]
    assert keys_of(store.list("vc1/seg")) == ["vc1/seg/2026/01", "vc1/seg/2026/02", "vc1/segx"]
    assert keys_of(store.list("vc1/seg/2026/0")) == ["vc1/seg/2026/01", "vc1/seg/2026/02"]
    assert keys_of(store.list("vc3/")) == []
    assert len(list(store.list(""))) == 5


def test_list_reports_size_and_a_utc_modification_time(store):
    store.put("sized", b"12345")
    (info,) = list(store.list("sized"))
    assert isinstance(info, ObjectInfo)
    assert info.size == 5
    assert info.last_modified.tzinfo is not None
    assert info.last_modified.utcoffset() == timedelta(0)
    assert abs(info.last_modified - datetime.now(UTC)) < timedelta(minutes=5)


@pytest.mark.parametrize(
    "bad_key", ["", "/abs", "a/../b", "..", "../x", "a//b", "a/", "./a", "a/./b", "a\\b"]
)
def test_it_rejects_keys_that_are_not_plain_relative_paths(store, bad_key):
    with pytest.raises(ValueError):
        store.put(bad_key, b"x")
    with pytest.raises(ValueError):
        store.get(bad_key)


def test_it_rejects_a_prefix_that_climbs_out(store):
    with pytest.raises(ValueError):
        list(store.list("../"))
    with pytest.raises(ValueError):
        list(store.list("/abs"))


def test_a_store_opened_again_on_its_url_sees_the_same_objects(store):
    store.put("shared/key", b"v")
    again = open_store(store.url)
    assert again.get("shared/key") == b"v"
    assert again.url == store.url


def test_it_is_safe_to_use_from_many_threads(store):
    def work(n: int) -> bytes:
        key = f"threads/{n % 7}/{n}"
        store.put(key, str(n).encode() * 10)
        if n % 3 == 0:
            store.delete(key)
            return b""
        return store.get(key)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(work, range(64)))
    for n, got in enumerate(results):
        assert got == (b"" if n % 3 == 0 else str(n).encode() * 10)
    assert len(list(store.list("threads/"))) == sum(1 for n in range(64) if n % 3)
