"""What each backend promises beyond the shared contract, and how bucket URLs are read."""

from __future__ import annotations

import os
import uuid

import boto3
import pytest

from core.storage import FileStore, MemoryStore, ObjectNotFound, StorageError, open_store
from core.storage import s3 as s3_module


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/x", "unsupported bucket URL scheme 'ftp' (use file://, mem:// or s3://)"),
        ("/tmp/bucket", "has no scheme"),
        ("file://relative/dir", "absolute folder"),
        ("file:///tmp/x?sync=1", "no query"),
        ("mem://", "needs a name"),
        ("s3://?region=us-east-1", "needs a bucket"),
        ("s3://b?colour=red", "unknown parameter(s) colour"),
        ("s3://b?region=a&region=b", "repeats parameter(s) region"),
        ("s3://b/p?prefix=q", "both as a path and as ?prefix="),
        ("s3://b?endpoint=localhost:9000", "endpoint must be an http:// or https:// URL"),
    ],
)
def test_a_bad_bucket_url_gets_a_one_line_value_error(url, message):
    with pytest.raises(ValueError) as caught:
        open_store(url)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_s3_urls_are_read_into_bucket_region_endpoint_and_prefix():
    store = open_store("s3://logs?region=eu-west-1&endpoint=http://127.0.0.1:9&prefix=/a/b/")
    assert (store.bucket, store.region, store.endpoint, store.prefix) == (
        "logs",
        "eu-west-1",
        "http://127.0.0.1:9",
        "a/b/",
    )
    assert open_store("s3://logs/a/b").prefix == "a/b/"
    assert open_store("s3://logs").region == "us-east-1"
    assert open_store(store.url).url == store.url


def test_two_mem_stores_on_one_name_share_objects_and_other_names_do_not():
    name = f"shared-{uuid.uuid4().hex}"
    first, second = open_store(f"mem://{name}"), open_store(f"mem://{name}")
    assert isinstance(first, MemoryStore)
    first.put("k", b"v")
    assert second.get("k") == b"v"
    with pytest.raises(ObjectNotFound):
        open_store(f"mem://other-{name}").get("k")


def test_a_mem_store_keeps_its_own_copy_of_the_bytes():
    store = open_store(f"mem://copy-{uuid.uuid4().hex}")
    buffer = bytearray(b"abc")
    store.put("k", buffer)
    buffer[0] = ord("z")
    assert store.get("k") == b"abc"


def test_file_store_puts_objects_at_their_key_path_and_leaves_no_temporary_files(tmp_path):
    store = open_store(tmp_path.as_uri())
    assert isinstance(store, FileStore)
    store.put("vci_a/segments/2026/01/x.seg", b"body")
    assert (tmp_path / "vci_a/segments/2026/01/x.seg").read_bytes() == b"body"
    store.put("vci_a/segments/2026/01/x.seg", b"again")
    assert sorted(p.name for p in (tmp_path / "vci_a/segments/2026/01").iterdir()) == ["x.seg"]


def test_file_store_creates_its_folder_and_prunes_emptied_ones(tmp_path):
    root = tmp_path / "new" / "bucket"
    store = open_store(root.as_uri())
    assert root.is_dir()
    store.put("a/b/c", b"1")
    store.put("a/d", b"2")
    store.delete("a/b/c")
    assert not (root / "a" / "b").exists()
    assert (root / "a" / "d").exists()
    store.delete("a/d")
    assert list(root.iterdir()) == []
    assert root.is_dir()


def test_file_store_rejects_path_traversal(tmp_path):
    store = open_store((tmp_path / "bucket").as_uri())
    (tmp_path / "secret").write_bytes(b"s")
    for key in ["../secret", "/etc/passwd", "a/../../secret"]:
        with pytest.raises(ValueError):
            store.get(key)
    with pytest.raises(ValueError):
        store.put(".floe-tmp-x", b"reserved for in-flight writes")


def test_file_store_hides_in_flight_temporary_files_from_listings(tmp_path):
    store = open_store(tmp_path.as_uri())
    store.put("a/done", b"1")
    (tmp_path / "a" / ".floe-tmp-next.123").write_bytes(b"half written")
    assert [info.key for info in store.list()] == ["a/done"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_file_store_wraps_os_errors_in_storage_error(tmp_path):
    store = open_store(tmp_path.as_uri())
    store.put("locked/x", b"1")
    (tmp_path / "locked").chmod(0o500)
    try:
        with pytest.raises(StorageError) as caught:
            store.put("locked/y", b"2")
        assert isinstance(caught.value.__cause__, OSError)
    finally:
        (tmp_path / "locked").chmod(0o700)


def test_file_store_wraps_a_key_colliding_with_a_folder_in_storage_error(tmp_path):
    store = open_store(tmp_path.as_uri())
    store.put("a/b", b"1")
    with pytest.raises(StorageError):
        store.put("a", b"a file where a folder is")


@pytest.fixture
def raw_s3(moto_s3_url):
    store = open_store(moto_s3_url)
    client = boto3.client("s3", endpoint_url=store.endpoint, region_name=store.region)
    return store.bucket, client


def test_s3_store_writes_under_its_prefix_and_strips_it_when_listing(moto_s3_url, raw_s3):
    bucket, client = raw_s3
    prefix = f"p-{uuid.uuid4().hex[:8]}"
    store = open_store(f"{moto_s3_url}&prefix={prefix}")
    store.put("vci_a/x", b"123")
    raw = client.get_object(Bucket=bucket, Key=f"{prefix}/vci_a/x")["Body"].read()
    assert raw == b"123"
    client.put_object(Bucket=bucket, Key=f"{prefix}-sibling/not-mine", Body=b"x")
    assert [info.key for info in store.list()] == ["vci_a/x"]


def test_s3_listing_follows_pages(moto_s3_url, monkeypatch):
    store = open_store(f"{moto_s3_url}&prefix=pages-{uuid.uuid4().hex[:8]}")
    for n in range(7):
        store.put(f"k{n}", b"x")
    monkeypatch.setattr(s3_module, "LIST_PAGE_SIZE", 2)
    assert [info.key for info in store.list()] == [f"k{n}" for n in range(7)]


def test_s3_delete_many_sends_chunks(moto_s3_url, monkeypatch):
    store = open_store(f"{moto_s3_url}&prefix=chunks-{uuid.uuid4().hex[:8]}")
    for n in range(7):
        store.put(f"k{n}", b"x")
    monkeypatch.setattr(s3_module, "DELETE_BATCH", 3)
    calls = []
    real = store._client.delete_objects
    monkeypatch.setattr(
        store._client,
        "delete_objects",
        lambda **kwargs: calls.append(len(kwargs["Delete"]["Objects"])) or real(**kwargs),
    )
    store.delete_many([f"k{n}" for n in range(6)])
    assert calls == [3, 3]
    assert [info.key for info in store.list()] == ["k6"]


def test_s3_backend_failures_are_storage_errors_with_the_cause(moto_s3_url):
    missing_bucket = moto_s3_url.replace("s3://", "s3://no-such-bucket-", 1)
    store = open_store(missing_bucket)
    with pytest.raises(StorageError) as caught:
        store.put("k", b"x")
    assert not isinstance(caught.value, ObjectNotFound)
    assert caught.value.__cause__ is not None
    with pytest.raises(StorageError):
        list(store.list())
