"""The REST reads behind `floe diagnose-record` (locate an offset's run) and `floe
file-scrubber` (the files the store knows, in keyset pages): answers, 404s, tenancy."""

from __future__ import annotations

import pytest

from metadata_store.models import Batch, Partition, SegmentFile, Topic

pytestmark = pytest.mark.django_db


def stored_topic(cluster) -> Partition:
    """Topic "audit": partition 0 holds offsets 10..29 in two runs of two files (one of
    them compacted), offsets 0..9 gone to retention."""
    topic = Topic.objects.create(cluster=cluster, name="audit", partition_count=1)
    part = Partition.objects.create(topic=topic, index=0, high_watermark=30, log_start_offset=10)
    p = cluster.public_id
    first = SegmentFile.objects.create(cluster=cluster, key=f"{p}/segments/a.seg", size=900)
    second = SegmentFile.objects.create(
        cluster=cluster, key=f"{p}/compacted/b.seg", size=500, level=1
    )
    for file, base, last, position in ((first, 10, 19, 100), (second, 20, 29, 0)):
        Batch.objects.create(
            partition=part, base_offset=base, last_offset=last, file=file, position=position,
            length=300, record_count=last - base + 1, batch_count=2, max_timestamp=1000 + last,
        )  # fmt: skip
    SegmentFile.objects.create(
        cluster=cluster, key=f"{p}/segments/gone.seg", size=1, state=SegmentFile.State.DELETED
    )
    return part


def locate(api, key: str, cluster, offset, *, topic="audit", partition=0):
    return api(key).get(
        f"/api/v1/clusters/{cluster.public_id}/topics/{topic}/partitions/{partition}/locate",
        {"offset": offset},
    )


def test_it_locates_the_run_holding_an_offset(api, alice):
    stored_topic(alice["cluster"])
    p = alice["cluster"].public_id
    answer = locate(api, alice["reader"], alice["cluster"], 15)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert {k: body[k] for k in ("file_key", "position", "length", "base_offset")} == {
        "file_key": f"{p}/segments/a.seg",
        "position": 100,
        "length": 300,
        "base_offset": 10,
    }
    assert (body["last_offset"], body["rewrite"], body["high_watermark"]) == (19, True, 30)
    second = locate(api, alice["reader"], alice["cluster"], 20).json()
    assert (second["file_key"], second["file_level"], second["rewrite"]) == (
        f"{p}/compacted/b.seg",
        1,
        False,
    )


def test_it_answers_404_with_a_reason_out_of_range(api, alice):
    stored_topic(alice["cluster"])
    for offset in (9, 30):
        answer = locate(api, alice["reader"], alice["cluster"], offset)
        assert answer.status_code == 404
        assert answer.json()["error"] == (
            f"offset {offset} is out of range: audit[0] holds offsets 10..29"
        )
    assert locate(api, alice["reader"], alice["cluster"], 0, partition=1).status_code == 404
    assert locate(api, alice["reader"], alice["cluster"], 0, topic="nope").status_code == 404
    assert locate(api, alice["reader"], alice["cluster"], -1).status_code == 400
    assert locate(api, alice["reader"], alice["cluster"], "").status_code == 400


def test_it_lists_known_files_in_keyset_pages(api, alice, settings):
    settings.FLOE_FILE_DELETE_GRACE_S = 123
    stored_topic(alice["cluster"])
    p = alice["cluster"].public_id
    url = f"/api/v1/clusters/{p}/files/"
    first = api(alice["reader"]).get(url, {"limit": 1}).json()
    assert [f["key"] for f in first["files"]] == [f"{p}/compacted/b.seg"]
    assert first["next_after"] == f"{p}/compacted/b.seg"
    assert first["prefix"] == f"{p}/" and first["orphan_grace_s"] == 123
    assert first["spared_prefixes"] == [f"{p}/journal/"]
    rest = api(alice["reader"]).get(url, {"after": first["next_after"]}).json()
    assert [f["key"] for f in rest["files"]] == [f"{p}/segments/a.seg"]  # not the deleted one
    assert rest["next_after"] is None
    assert api(alice["reader"]).get(url, {"limit": 1001}).status_code == 400


def test_it_rejects_another_tenant_and_no_key(api, alice, bob):
    stored_topic(alice["cluster"])
    assert locate(api, bob["admin"], alice["cluster"], 15).status_code == 404
    files = f"/api/v1/clusters/{alice['cluster'].public_id}/files/"
    assert api(bob["admin"]).get(files).status_code == 404
    assert api().get(files).status_code == 401
    assert locate(api, "", alice["cluster"], 15).status_code == 401
