"""A topic's Iceberg table on its console page, in a real browser: during the first
backfill of a topic that held records before its table was switched on — the last
snapshot (committed by PyIceberg through the cluster's catalog on the live server), the
rows, how far behind the topic it is in records and seconds, the files and bytes, a
progress bar, and the PyIceberg and DuckDB queries to copy; at a desktop's width and a
phone's."""

from __future__ import annotations

import pyarrow as pa
import pytest
from django.template.defaultfilters import filesizeformat
from playwright.sync_api import expect
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow

from metadata_store.clusters import cluster_bucket_claim
from tests.controlplane.browser.conftest import log_in
from tests.factories import make_api_key, make_cluster, make_org
from tests.jobs.segments import SegmentWriter, batch
from virtualclusters.tables.topic_tables import topic_table_enable

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def test_the_table_section_shows_the_first_backfill_and_the_tables_state(
    page, live_server, screenshots, tmp_path
):
    user, org = make_org("Tables")
    cluster, _ = make_cluster("lake", org=org, auto_create_topics=False)
    bucket = (tmp_path / "bucket").as_uri()
    (tmp_path / "bucket").mkdir()
    cluster_bucket_claim(cluster=cluster, bucket_url=bucket)
    cluster.refresh_from_db()
    writer = SegmentWriter(cluster, bucket)
    topic = writer.topic("orders", partitions=2)
    writer.commit([(topic, 0, batch([(b"k", b"v")] * 10)), (topic, 1, batch([(b"k", b"v")] * 6))])
    topic_table_enable(topic=topic, schema="raw")  # after the records: a backfill

    # Partition 0's first 4 records appended (PyIceberg through the catalog, as the job's
    # driver commits: the snapshot's summary says how far each partition got).
    rest = RestCatalog(
        "floe",
        uri=f"{live_server.url}/iceberg/{cluster.public_id}",
        token=make_api_key(org),
    )
    table = rest.load_table(("topics", "orders"))
    rows = pa.Table.from_pylist(
        [
            {"partition": 0, "offset": n, "timestamp": 1_700_000_000_000_000, "key": b"k",
             "value": b"v", "headers": []}
            for n in range(4)
        ],
        schema=schema_to_pyarrow(table.schema()),
    )  # fmt: skip
    table.append(rows, snapshot_properties={"floe.last-offsets": '{"0": 3}'})

    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/topics/orders/")
    expect(page.locator("#table-backfill")).to_contain_text("First backfill: 4 of 16 records")
    bar = page.locator("#table-backfill-bar")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("4", "16")
    snapshot = table.refresh().current_snapshot()
    expect(page.locator("#table-snapshot")).to_contain_text(f"{snapshot.snapshot_id} · append")
    expect(page.locator("#table-lag")).to_contain_text("12 records · ")
    data_bytes = int(snapshot.summary["total-files-size"])
    expect(page.locator("#table-files")).to_contain_text(
        f"1 · {filesizeformat(data_bytes)}".replace("\xa0", " ")
    )
    expect(page.locator("#table-query")).to_contain_text(f"/iceberg/{cluster.public_id}")
    expect(page.locator("#table-query-duckdb")).to_contain_text(
        f"/iceberg/{cluster.public_id}', SECRET floe)"
    )
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.locator("#table").screenshot(path=screenshots / f"topic-table-backfill-{width}.png")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page is {overflow}px wider than the screen"
