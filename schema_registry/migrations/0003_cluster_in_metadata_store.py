"""VirtualCluster moved to the metadata store: the foreign key points at it, state only —
the table it references is the same."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0012_clusters_from_virtualclusters"),
        ("schema_registry", "0002_version_schema_restrict"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="registry",
                    name="cluster",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="schema_registry",
                        to="metadata_store.virtualcluster",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
