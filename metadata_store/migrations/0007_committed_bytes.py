"""A file's committed record bytes, and duplicates named in the commit's answer.

An idempotent producer that sends a batch again (its first answer was lost) gets the
original offset back, and the batch's bytes are in the new file but in no index row:
nothing a consumer reads, nothing billing may count. ``floe_commit`` now stores each
file's ``data_bytes`` — the bytes of the batches it gave offsets to — and marks such a
batch ``"duplicate": true`` in its answer, so that the meters (bytes written) and the
agents (uncompressed bytes) count every committed batch once.

The function is 0004's with those two changes (made to its text here, so that the two
cannot drift apart silently: a change to 0004's text that these replacements no longer
find fails the migration).
"""

import importlib

from django.db import migrations, models

_0004 = importlib.import_module("metadata_store.migrations.0004_partition_runs")
PREVIOUS = _0004.FORWARD[_0004.FORWARD.index("CREATE OR REPLACE FUNCTION floe_commit(") :]

_CHANGES = [
    (  # a per-batch flag beside the answers' arrays
        "    accepted int[] := '{}';",
        "    dup bool[] := array_fill(false, ARRAY[n]);\n    accepted int[] := '{}';",
    ),
    (
        "                        bases[i] := v_dup;  -- a duplicate: stored once",
        "                        bases[i] := v_dup;  -- a duplicate: stored once\n"
        "                        dup[i] := true;",
    ),
    (
        "'log_start_offset', starts[j])",
        "'log_start_offset', starts[j])\n"
        "        || CASE WHEN dup[j] THEN '{\"duplicate\": true}'::jsonb ELSE '{}'::jsonb END",
    ),
    (
        "    UPDATE floe_file SET commit_result = v_result WHERE id = v_file;",
        "    UPDATE floe_file SET commit_result = v_result,\n"
        "        data_bytes = (SELECT coalesce(sum(p_len[j]), 0) FROM unnest(accepted) AS j)\n"
        "     WHERE id = v_file;",
    ),
]


def _changed(text: str) -> str:
    for old, new in _CHANGES:
        if text.count(old) != 1:
            raise ValueError(f"floe_commit's text changed: {old!r} not found once")
        text = text.replace(old, new)
    return text


FORWARD = "ALTER TABLE floe_file ADD COLUMN data_bytes bigint;\n" + _changed(PREVIOUS)
BACKWARD = PREVIOUS + "\nALTER TABLE floe_file DROP COLUMN data_bytes;\n"


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0006_lean_indexes")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="segmentfile",
                    name="data_bytes",
                    field=models.BigIntegerField(blank=True, null=True),
                )
            ],
        )
    ]
