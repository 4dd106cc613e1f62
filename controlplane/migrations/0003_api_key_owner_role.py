"""API keys belong to a person or to the organization's service account, and carry a
role. Existing keys: a key whose creator is recorded (and still a member) becomes that
person's key; any other becomes a service-account key. Their scope becomes the role
(admin → admin, read-only → member), so no key can do more than before."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def owners_and_roles(apps, schema_editor):
    ApiKey = apps.get_model("controlplane", "ApiKey")
    Membership = apps.get_model("controlplane", "Membership")
    for key in ApiKey.objects.all():
        key.role = "member" if key.scope == "read_only" else "admin"
        member = (
            key.created_by_id is not None
            and Membership.objects.filter(
                organization_id=key.organization_id, user_id=key.created_by_id
            ).exists()
        )
        key.owner_id = key.created_by_id if member else None
        key.service_account = not member
        key.save(update_fields=["role", "owner", "service_account"])


def scopes(apps, schema_editor):
    ApiKey = apps.get_model("controlplane", "ApiKey")
    ApiKey.objects.filter(role="member").update(scope="read_only")
    ApiKey.objects.exclude(role="member").update(scope="admin")


class Migration(migrations.Migration):
    dependencies = [
        ("controlplane", "0002_console"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="role",
            field=models.CharField(
                choices=[("owner", "Owner"), ("admin", "Admin"), ("member", "Member (read-only)")],
                default="admin",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="apikey",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="api_keys",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="apikey",
            name="service_account",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(owners_and_roles, scopes),
        migrations.RemoveField(model_name="apikey", name="scope"),
        migrations.AddConstraint(
            model_name="apikey",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("owner__isnull", False), ("service_account", True), _negated=True
                ),
                name="api_key_person_or_service_account",
            ),
        ),
    ]
