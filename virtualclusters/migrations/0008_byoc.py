"""Bring your own cloud: a cluster's bucket, and job runs leased by its agents."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0007_move_metadata_store_models"),
    ]

    operations = [
        migrations.AddField(
            model_name="virtualcluster",
            name="bucket_url",
            field=models.CharField(blank=True, default="", max_length=1024),
        ),
        migrations.AddField(
            model_name="jobrun",
            name="lease_agent",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="jobrun",
            name="lease_token",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="jobrun",
            name="lease_expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="jobrun",
            name="attempts",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="jobrun",
            name="progress",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
