"""Transactions (KIP-98): a transactional id's state on its producer-id row, the
partitions and group offsets of open transactions, and commit/abort markers.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0004_partition_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="producerid",
            name="txn_started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="producerid",
            name="txn_state",
            field=models.CharField(
                choices=[
                    ("empty", "Empty"),
                    ("ongoing", "Ongoing"),
                    ("complete_commit", "Complete Commit"),
                    ("complete_abort", "Complete Abort"),
                ],
                db_default="empty",
                default="empty",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="producerid",
            name="txn_timeout_ms",
            field=models.IntegerField(db_default=60000, default=60000),
        ),
        migrations.CreateModel(
            name="TransactionMarker",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "partition",
                        "marker_offset",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("marker_offset", models.BigIntegerField()),
                ("producer_id", models.BigIntegerField()),
                ("producer_epoch", models.SmallIntegerField()),
                ("committed", models.BooleanField()),
                ("first_offset", models.BigIntegerField(blank=True, null=True)),
                ("timestamp", models.BigIntegerField()),
                (
                    "partition",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.partition",
                    ),
                ),
            ],
            options={
                "db_table": "floe_txn_marker",
            },
        ),
        migrations.CreateModel(
            name="TransactionOffset",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("group_id", models.CharField(max_length=255)),
                ("committed_offset", models.BigIntegerField()),
                ("leader_epoch", models.IntegerField(default=-1)),
                ("metadata", models.TextField(blank=True, default="")),
                (
                    "partition",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.partition",
                    ),
                ),
                (
                    "producer",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="metadata_store.producerid"
                    ),
                ),
            ],
            options={
                "db_table": "floe_txn_offset",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("producer", "group_id", "partition"), name="txn_offset_unique"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="TransactionPartition",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("first_offset", models.BigIntegerField(blank=True, null=True)),
                (
                    "partition",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.partition",
                    ),
                ),
                (
                    "producer",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="metadata_store.producerid"
                    ),
                ),
            ],
            options={
                "db_table": "floe_txn_partition",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("producer", "partition"), name="txn_partition_unique"
                    )
                ],
            },
        ),
    ]
