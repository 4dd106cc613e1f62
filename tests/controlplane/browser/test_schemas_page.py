"""The cluster's Schemas page in a real browser, with a real agent: confluent-kafka's
`SchemaRegistryClient` registers through the agent, and the page shows the subjects, a
subject's versions, the text (read by the agent from the bucket over the channel it
opens), the diff of two versions and the references; a delete needs the subject's name
typed. Screenshots wide and narrow."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from playwright.sync_api import expect

from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.controlplane.browser.conftest import log_in
from tests.controlplane.browser.test_console_pages import shots_wide_and_narrow
from tests.factories import make_cluster, make_org

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "id", "type": "long"}]}  # fmt: skip
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "note", "type": "string", "default": ""}]}  # fmt: skip
MONEY = {"type": "record", "name": "Money", "namespace": "shop",
         "fields": [{"name": "cents", "type": "long"}]}  # fmt: skip
INVOICE = {"type": "record", "name": "Invoice", "namespace": "shop",
           "fields": [{"name": "total", "type": "shop.Money"}]}  # fmt: skip


def test_the_schemas_page_reads_texts_through_an_agent_and_deletes_with_the_name_typed(
    page,
    live_server,
    agent,  # noqa: F811
    screenshots,
):
    user, org = make_org("Shop")
    cluster, key = make_cluster("shop", org=org)
    running = agent(key)
    client = SchemaRegistryClient({"url": f"http://127.0.0.1:{running.registry_port}"})
    client.register_schema("orders-value", Schema(json.dumps(ORDER_V1), "AVRO"))
    second = client.register_schema("orders-value", Schema(json.dumps(ORDER_V2), "AVRO"))
    money = client.register_schema("money", Schema(json.dumps(MONEY), "AVRO"))
    invoice = client.register_schema(
        "invoices-value",
        Schema(json.dumps(INVOICE), "AVRO", [SchemaReference("shop.Money", "money", 1)]),
    )

    log_in(page, user.email)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_role("link", name="Schemas").click()
    rows = page.locator("tr[data-subject]")
    expect(rows).to_have_count(3)
    expect(page.locator('tr[data-subject="orders-value"]')).to_contain_text(str(second))
    shots_wide_and_narrow(page, screenshots, "schemas-subjects")

    page.get_by_role("link", name="orders-value").click()
    expect(page.locator("tr[data-version]")).to_have_count(2)
    expect(page.locator("#schema-text")).to_contain_text('"name": "note"')
    expect(page.locator("#schema")).to_contain_text(running.agent_id)
    page.locator('[data-diff="1-2"]').click()
    expect(page.locator("#schema-diff .diff-add")).to_contain_text(['+      "name": "note",'])
    expect(page.locator("#schema-diff .diff-del")).to_have_count(0)
    shots_wide_and_narrow(page, screenshots, "schemas-diff")

    page.goto(f"/clusters/{cluster.public_id}/schemas/money/")
    expect(page.locator("#referenced-by")).to_have_text(f"schema id {invoice}")
    page.goto(f"/clusters/{cluster.public_id}/schemas/invoices-value/")
    expect(page.locator("#schema")).to_contain_text("shop.Money → money v1")
    page.locator("#confirm-subject").fill("money")  # its name is not this subject's
    page.get_by_role("button", name="Delete subject").click()
    expect(page.locator(".alert-error")).to_contain_text("Type the subject's name")
    assert client.get_latest_version("invoices-value").schema_id == invoice

    page.goto(f"/clusters/{cluster.public_id}/schemas/money/")
    page.locator("#confirm-subject").fill("money")
    page.get_by_role("button", name="Delete subject").click()  # referenced: refused
    expect(page.locator(".alert-error")).to_contain_text("One or more references exist")
    assert client.get_latest_version("money").schema_id == money

    page.goto(f"/clusters/{cluster.public_id}/schemas/orders-value/")
    page.locator("#confirm-subject").fill("orders-value")
    page.locator("#delete-subject").get_by_label("Permanently").check()
    shots_wide_and_narrow(page, screenshots, "schemas-delete")
    page.locator("#delete-subject").get_by_label("Permanently").uncheck()
    page.get_by_role("button", name="Delete subject").click()
    expect(page.locator(".alert-success")).to_contain_text("deleted (soft")
    expect(page.locator("tr[data-version] .badge")).to_have_count(2)
    assert "orders-value" not in client.get_subjects()
