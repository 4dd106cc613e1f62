"""The metadata store's models, taken over from ``virtualclusters`` (its 0001–0006 made the
tables). State only: nothing in the database changes, no row moves.
"""

import django.db.models.deletion
import django.db.models.expressions
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("virtualclusters", "0007_move_metadata_store_models"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Partition",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("index", models.IntegerField()),
                        ("high_watermark", models.BigIntegerField(default=0)),
                        ("log_start_offset", models.BigIntegerField(default=0)),
                    ],
                    options={
                        "db_table": "floe_partition",
                    },
                ),
                migrations.CreateModel(
                    name="SegmentFile",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("key", models.CharField(max_length=512)),
                        ("size", models.BigIntegerField()),
                        ("level", models.SmallIntegerField(default=0)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("live", "Live"),
                                    ("replaced", "Replaced"),
                                    ("deleted", "Deleted"),
                                ],
                                default="live",
                                max_length=16,
                            ),
                        ),
                        ("batch_count", models.IntegerField(default=0)),
                        ("commit_result", models.JSONField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("unreferenced_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="files",
                                to="virtualclusters.virtualcluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "floe_file",
                    },
                ),
                migrations.CreateModel(
                    name="Batch",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "partition",
                                "last_offset",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("base_offset", models.BigIntegerField()),
                        ("last_offset", models.BigIntegerField()),
                        ("position", models.BigIntegerField()),
                        ("length", models.IntegerField()),
                        ("record_count", models.IntegerField()),
                        ("max_timestamp", models.BigIntegerField()),
                        ("producer_id", models.BigIntegerField(default=-1)),
                        ("producer_epoch", models.SmallIntegerField(default=-1)),
                        ("base_sequence", models.IntegerField(default=-1)),
                        (
                            "partition",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                to="metadata_store.partition",
                            ),
                        ),
                        (
                            "file",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                to="metadata_store.segmentfile",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "floe_batch",
                    },
                ),
                migrations.CreateModel(
                    name="Topic",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("name", models.CharField(max_length=249)),
                        ("partition_count", models.PositiveIntegerField()),
                        ("configs", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="topics",
                                to="virtualclusters.virtualcluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "floe_topic",
                    },
                ),
                migrations.AddField(
                    model_name="partition",
                    name="topic",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="partitions",
                        to="metadata_store.topic",
                    ),
                ),
                migrations.CreateModel(
                    name="Agent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("agent_id", models.CharField(max_length=64)),
                        ("host", models.CharField(max_length=255)),
                        ("port", models.IntegerField()),
                        ("zone", models.CharField(blank=True, default="", max_length=64)),
                        ("load", models.FloatField(default=0.0)),
                        ("started_at", models.DateTimeField(auto_now_add=True)),
                        ("last_heartbeat", models.DateTimeField()),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="agents",
                                to="virtualclusters.virtualcluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "floe_agent",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("cluster", "agent_id"), name="agent_unique"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="GroupOffset",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("group_id", models.CharField(max_length=255)),
                        ("committed_offset", models.BigIntegerField()),
                        ("leader_epoch", models.IntegerField(default=-1)),
                        ("metadata", models.TextField(blank=True, default="")),
                        ("committed_at", models.DateTimeField(auto_now=True)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                to="virtualclusters.virtualcluster",
                            ),
                        ),
                        (
                            "partition",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                to="metadata_store.partition",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "floe_group_offset",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("cluster", "group_id", "partition"),
                                name="group_offset_unique",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ProducerId",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "transactional_id",
                            models.CharField(blank=True, max_length=255, null=True),
                        ),
                        ("epoch", models.SmallIntegerField(default=0)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                to="virtualclusters.virtualcluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "floe_producer_id",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("cluster", "transactional_id"),
                                name="transactional_id_unique",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ProducerState",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("producer_id", models.BigIntegerField()),
                        ("producer_epoch", models.SmallIntegerField()),
                        ("last_sequence", models.IntegerField()),
                        ("last_offset", models.BigIntegerField()),
                        ("updated_at", models.DateTimeField(auto_now=True)),
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
                        "db_table": "floe_producer_state",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("partition", "producer_id"), name="producer_state_unique"
                            )
                        ],
                    },
                ),
                migrations.AddIndex(
                    model_name="segmentfile",
                    index=models.Index(fields=["cluster", "state", "level"], name="file_state_idx"),
                ),
                migrations.AddConstraint(
                    model_name="segmentfile",
                    constraint=models.UniqueConstraint(
                        fields=("cluster", "key"), name="file_key_unique"
                    ),
                ),
                migrations.AddIndex(
                    model_name="batch",
                    index=models.Index(fields=["file"], name="batch_file_idx"),
                ),
                migrations.AddConstraint(
                    model_name="batch",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("base_offset__gte", 0),
                            ("record_count__gte", 1),
                            (
                                "last_offset__gte",
                                django.db.models.expressions.CombinedExpression(
                                    django.db.models.expressions.CombinedExpression(
                                        models.F("base_offset"), "+", models.F("record_count")
                                    ),
                                    "-",
                                    models.Value(1),
                                ),
                            ),
                            ("position__gte", 0),
                            ("length__gt", 0),
                        ),
                        name="batch_offsets_and_bytes_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="topic",
                    constraint=models.UniqueConstraint(
                        fields=("cluster", "name"), name="topic_name_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="partition",
                    constraint=models.UniqueConstraint(
                        fields=("topic", "index"), name="partition_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="partition",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("log_start_offset__gte", 0),
                            ("high_watermark__gte", models.F("log_start_offset")),
                        ),
                        name="partition_offsets_ordered",
                    ),
                ),
            ],
        )
    ]
