"""VirtualCluster moved to the metadata store: the foreign key points at it, state only —
the table it references is the same."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0002_organization_in_tenancy"),
        ("metadata_store", "0012_clusters_from_virtualclusters"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="usagehour",
                    name="cluster",
                    field=models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="metadata_store.virtualcluster",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
