"""Organization moved to the base app (tenancy): the foreign key points at it, state
only — the table it references is the same."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0001_from_controlplane"),
        ("virtualclusters", "0010_throughput_out"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="virtualcluster",
                    name="organization",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="clusters",
                        to="tenancy.organization",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
