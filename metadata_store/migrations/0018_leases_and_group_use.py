"""Issue 38: one lease table for background work (migrations' copiers, job runs: holder,
epoch, token, expiry on the database's clock), and what says a consumer group was used in
Floe — when a member first joined it (`joined_at`) and which offsets a migration's copier
wrote (`mirrored`) — so reads alone never stop a group's offsets from being copied."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0017_consumer_groups"),
    ]

    operations = [
        migrations.AddField(
            model_name="grouplease",
            name="joined_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="groupoffset",
            name="mirrored",
            field=models.BooleanField(db_default=False, default=False),
        ),
        # Groups saved with members or a generation before this migration were joined.
        migrations.RunSQL(
            "UPDATE floe_group_lease SET joined_at = now()"
            " WHERE generation > 0 OR members <> '[]'::jsonb",
            migrations.RunSQL.noop,
        ),
        migrations.CreateModel(
            name="Lease",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("subject", models.CharField(max_length=64)),
                ("holder", models.CharField(max_length=64)),
                ("epoch", models.BigIntegerField()),
                ("token", models.CharField(max_length=64)),
                ("expires_at", models.DateTimeField()),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.virtualcluster",
                    ),
                ),
            ],
            options={
                "db_table": "floe_lease",
                "constraints": [
                    models.UniqueConstraint(fields=("cluster", "subject"), name="lease_unique"),
                    models.CheckConstraint(
                        condition=models.Q(("epoch__gte", 1)), name="lease_epoch"
                    ),
                ],
            },
        ),
    ]
