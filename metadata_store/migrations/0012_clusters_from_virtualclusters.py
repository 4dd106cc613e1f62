"""VirtualCluster and AgentKey move here from virtualclusters (every row of the store hangs
from a cluster): state only, their tables (virtualclusters_virtualcluster,
virtualclusters_agentkey) and rows stay; this app's foreign keys point at them."""

import django.db.models.deletion
import metadata_store.clusters
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0011_organization_in_tenancy"),
        ("metadata_store", "0011_random_producer_ids"),
        ("tenancy", "0001_from_controlplane"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="VirtualCluster",
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
                            "public_id",
                            models.CharField(
                                default=metadata_store.clusters._cluster_id,
                                editable=False,
                                max_length=32,
                                unique=True,
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("auto_create_topics", models.BooleanField(default=True)),
                        ("default_partitions", models.PositiveIntegerField(default=1)),
                        ("default_retention_ms", models.BigIntegerField(default=604800000)),
                        ("acls_enabled", models.BooleanField(default=False)),
                        ("max_flush_age_ms", models.PositiveIntegerField(default=250)),
                        ("max_flush_bytes", models.PositiveIntegerField(default=8388608)),
                        ("bucket_url", models.CharField(blank=True, default="", max_length=1024)),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="clusters",
                                to="tenancy.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "virtualclusters_virtualcluster",
                    },
                ),
                migrations.CreateModel(
                    name="AgentKey",
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
                            "public_id",
                            models.CharField(
                                default=metadata_store.clusters._agent_key_id,
                                editable=False,
                                max_length=32,
                                unique=True,
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("display_prefix", models.CharField(max_length=32)),
                        ("digest", models.CharField(max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="agent_keys",
                                to="metadata_store.virtualcluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "virtualclusters_agentkey",
                    },
                ),
                migrations.AlterField(
                    model_name="agent",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agents",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="grouplease",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="groupoffset",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="producerid",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="segmentfile",
                    name="cluster",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="files",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="topic",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="topics",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="virtualcluster",
                    constraint=models.UniqueConstraint(
                        fields=("organization", "name"), name="cluster_name_unique_in_org"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
