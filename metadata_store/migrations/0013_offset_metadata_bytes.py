"""Committed offsets' metadata as bytes: Kafka's offset metadata is any string, NUL
included (librdkafka sends its C strings with their terminator), which PostgreSQL's text
cannot hold. Existing rows keep their text as its UTF-8 bytes."""

from django.db import migrations, models

_TABLES = ("floe_group_offset", "floe_txn_offset")


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0012_clusters_from_virtualclusters")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql=[
                        f"ALTER TABLE {table} ALTER COLUMN metadata DROP DEFAULT,"
                        " ALTER COLUMN metadata TYPE bytea USING convert_to(metadata, 'UTF8')"
                        for table in _TABLES
                    ],
                    # Back to text: up to the first NUL (what a C client reads of it).
                    reverse_sql=[
                        f"ALTER TABLE {table} ALTER COLUMN metadata TYPE text USING"
                        " convert_from(substring(metadata FROM 1 FOR coalesce(nullif("
                        "position('\\x00'::bytea IN metadata), 0) - 1, length(metadata))),"
                        " 'UTF8')"
                        for table in _TABLES
                    ],
                )
            ],
            state_operations=[
                migrations.AlterField(
                    model_name=model,
                    name="metadata",
                    field=models.BinaryField(blank=True, default=b""),
                )
                for model in ("groupoffset", "transactionoffset")
            ],
        )
    ]
