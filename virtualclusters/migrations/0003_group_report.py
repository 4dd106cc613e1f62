import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0002_commit_function"),
    ]

    operations = [
        migrations.CreateModel(
            name="GroupReport",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("group_id", models.CharField(max_length=255)),
                ("agent_id", models.CharField(max_length=64)),
                ("state", models.CharField(max_length=32)),
                ("protocol_type", models.CharField(blank=True, default="", max_length=64)),
                ("protocol", models.CharField(blank=True, default="", max_length=255)),
                ("generation", models.IntegerField(default=0)),
                ("leader", models.CharField(blank=True, default="", max_length=255)),
                ("members", models.JSONField(blank=True, default=list)),
                ("reported_at", models.DateTimeField()),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="virtualclusters.virtualcluster",
                    ),
                ),
            ],
            options={
                "db_table": "floe_group_report",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("cluster", "group_id"), name="group_report_unique"
                    )
                ],
            },
        ),
    ]
