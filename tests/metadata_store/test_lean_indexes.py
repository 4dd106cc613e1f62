"""The hottest tables carry only the indexes their queries use (each costs on every commit)."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _indexes(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return {name: definition.split(" USING ")[1] for name, definition in cursor.fetchall()}


def test_the_batch_index_has_its_key_and_the_file_lookup_only():
    assert _indexes("floe_batch") == {
        "floe_batch_pkey": "btree (partition_id, last_offset)",
        "batch_file_idx": "btree (file_id)",
    }


def test_the_file_table_has_no_index_its_others_lead_with():
    assert sorted(_indexes("floe_file").values()) == [
        "btree (cluster_id, key)",
        "btree (cluster_id, state, level)",
        "btree (id)",
    ]
