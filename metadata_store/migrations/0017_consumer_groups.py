"""KIP-848 consumer groups (issue 32): a group lease row says which protocol the group
speaks and keeps the consumer protocol's group-level state; a cluster has the group session
timeout and heartbeat interval of such groups (Kafka's group.consumer.* settings)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0016_mirrored_partitions"),
    ]

    operations = [
        migrations.AddField(
            model_name="grouplease",
            name="extra",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="grouplease",
            name="group_type",
            field=models.CharField(default="classic", max_length=16),
        ),
        migrations.AddField(
            model_name="virtualcluster",
            name="consumer_heartbeat_interval_ms",
            field=models.PositiveIntegerField(default=5000),
        ),
        migrations.AddField(
            model_name="virtualcluster",
            name="consumer_session_timeout_ms",
            field=models.PositiveIntegerField(default=45000),
        ),
    ]
