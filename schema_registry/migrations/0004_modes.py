from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("schema_registry", "0003_cluster_in_metadata_store"),
    ]

    operations = [
        migrations.AddField(
            model_name="registry",
            name="mode",
            field=models.CharField(default="READWRITE", max_length=32),
        ),
        migrations.AddField(
            model_name="subject",
            name="mode",
            field=models.CharField(blank=True, max_length=32, null=True),
        ),
    ]
