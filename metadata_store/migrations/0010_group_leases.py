"""Group leases (metadata_store.group_leases): who coordinates a consumer group, with
its fencing epoch, expiry by the database's clock, and the group as last saved."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0009_plan_runs"),
        ("virtualclusters", "0010_throughput_out"),
    ]

    operations = [
        migrations.CreateModel(
            name="GroupLease",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("group_id", models.CharField(max_length=255)),
                ("agent_id", models.CharField(max_length=64)),
                ("epoch", models.BigIntegerField()),
                ("expires_at", models.DateTimeField()),
                ("generation", models.IntegerField(default=0)),
                ("protocol_type", models.CharField(blank=True, default="", max_length=255)),
                ("protocol_name", models.CharField(blank=True, default="", max_length=255)),
                ("leader", models.CharField(blank=True, default="", max_length=255)),
                ("members", models.JSONField(blank=True, default=list)),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="virtualclusters.virtualcluster",
                    ),
                ),
            ],
            options={
                "db_table": "floe_group_lease",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("cluster", "group_id"), name="group_lease_unique"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("epoch__gte", 1)), name="group_lease_epoch"
                    ),
                ],
            },
        ),
    ]
