"""Ripcord as a cluster setting: the cluster's agents keep serving clients while the
control plane is unreachable (an agent's --ripcord flag turns it on for that agent)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0018_leases_and_group_use"),
    ]

    operations = [
        migrations.AddField(
            model_name="virtualcluster",
            name="ripcord",
            field=models.BooleanField(default=False),
        ),
    ]
