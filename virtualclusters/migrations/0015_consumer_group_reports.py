"""KIP-848 consumer groups (issue 32): a group report says which protocol the group speaks
and, for the consumer protocol, the target assignment's epoch."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0014_migrations"),
    ]

    operations = [
        migrations.AddField(
            model_name="groupreport",
            name="assignment_epoch",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="groupreport",
            name="group_type",
            field=models.CharField(default="classic", max_length=16),
        ),
    ]
