"""Group leases (metadata_store.group_leases): who coordinates a consumer group, with
its fencing epoch, expiry by the database's clock, and the group as last saved.

Every holder renews each of its leases once a second: the row is rewritten each time, so
the table leaves half of each page free (fillfactor 50) for those updates to stay on
their page (HOT: no index entries, no page splits; `expires_at` is not indexed for that
reason) and is vacuumed after 5 % of its rows changed, not 20 %."""

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
        migrations.RunSQL(
            "ALTER TABLE floe_group_lease SET (fillfactor = 50,"
            " autovacuum_vacuum_scale_factor = 0.05)",
            reverse_sql="ALTER TABLE floe_group_lease RESET (fillfactor,"
            " autovacuum_vacuum_scale_factor)",
        ),
    ]
