"""The project owns no models: Organization, Membership and Invitation moved to the base
app (``tenancy``), ApiKey and AuditEvent to ``team``. State only — the tables keep their
names and rows (the new models name them in ``db_table``) — and the content types follow
the models, so anything keyed by them (permissions) still finds them."""

from django.db import migrations

MOVED = {"organization": "tenancy", "membership": "tenancy", "invitation": "tenancy"}
MOVED |= {"apikey": "team", "auditevent": "team"}


def _relabel(apps, schema_editor, *, forward: bool) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model, app in MOVED.items():
        old, new = ("controlplane", app) if forward else (app, "controlplane")
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, forward=True)


def backwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, forward=False)


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("controlplane", "0003_api_key_owner_role"),
        ("tenancy", "0001_from_controlplane"),
        ("team", "0001_from_controlplane"),
        ("billing", "0002_organization_in_tenancy"),
        ("virtualclusters", "0011_organization_in_tenancy"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ApiKey"),
                migrations.DeleteModel(name="AuditEvent"),
                migrations.DeleteModel(name="Invitation"),
                migrations.DeleteModel(name="Membership"),
                migrations.DeleteModel(name="Organization"),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
