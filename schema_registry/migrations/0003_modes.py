from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("schema_registry", "0002_version_schema_restrict"),
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
