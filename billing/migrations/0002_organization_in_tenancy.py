"""Organization moved to the base app (tenancy): the foreign keys point at it, state
only — the table they reference is the same."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0001_initial"),
        ("tenancy", "0001_from_controlplane"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="activeinterval",
                    name="organization",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="tenancy.organization"
                    ),
                ),
                migrations.AlterField(
                    model_name="budget",
                    name="organization",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="budget",
                        to="tenancy.organization",
                    ),
                ),
                migrations.AlterField(
                    model_name="invoice",
                    name="organization",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="invoices",
                        to="tenancy.organization",
                    ),
                ),
                migrations.AlterField(
                    model_name="subscription",
                    name="organization",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="subscriptions",
                        to="tenancy.organization",
                    ),
                ),
                migrations.AlterField(
                    model_name="usagehour",
                    name="organization",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="tenancy.organization"
                    ),
                ),
                migrations.AlterField(
                    model_name="usagetopichour",
                    name="organization",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="tenancy.organization"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
