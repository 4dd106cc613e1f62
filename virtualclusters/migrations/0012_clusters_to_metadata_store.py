"""VirtualCluster and AgentKey moved to the metadata store (state only: tables and rows
stay); this app's foreign keys point at them there, and their content types follow."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


MOVED = ("virtualcluster", "agentkey")


def _relabel(apps: StateApps, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _relabel(apps, "virtualclusters", "metadata_store")


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:

    _relabel(apps, "metadata_store", "virtualclusters")


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("billing", "0003_cluster_in_metadata_store"),
        ("metadata_store", "0012_clusters_from_virtualclusters"),
        ("schema_registry", "0003_cluster_in_metadata_store"),
        ("virtualclusters", "0011_organization_in_tenancy"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="jobrun",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="job_runs",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="grouplagsample",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="throughputsample",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="saslcredential",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sasl_credentials",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="acl",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="acls",
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="groupreport",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        to="metadata_store.virtualcluster",
                    ),
                ),
                migrations.DeleteModel(
                    name="AgentKey",
                ),
                migrations.DeleteModel(
                    name="VirtualCluster",
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
