"""Issue 38: a mirrored topic's configs as copied from its source (value and origin)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0016_leases"),
    ]

    operations = [
        migrations.AddField(
            model_name="migrationtopic",
            name="configs",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
