"""ApiKey and AuditEvent move here from controlplane: state only, their tables
(controlplane_apikey, controlplane_auditevent) and rows stay as they are."""

import django.db.models.deletion
import team.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("controlplane", "0003_api_key_owner_role"),
        ("tenancy", "0001_from_controlplane"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiKey",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "public_id",
                            models.CharField(
                                default=team.models._api_key_id,
                                editable=False,
                                max_length=32,
                                unique=True,
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        (
                            "role",
                            models.CharField(
                                choices=[
                                    ("owner", "Owner"),
                                    ("admin", "Admin"),
                                    ("member", "Member (read-only)"),
                                ],
                                default="admin",
                                max_length=16,
                            ),
                        ),
                        ("service_account", models.BooleanField(default=False)),
                        ("display_prefix", models.CharField(max_length=32)),
                        ("digest", models.CharField(max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_keys",
                                to="tenancy.organization",
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="api_keys",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "controlplane_apikey",
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("owner__isnull", False),
                                    ("service_account", True),
                                    _negated=True,
                                ),
                                name="api_key_person_or_service_account",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("actor_label", models.CharField(max_length=255)),
                        ("action", models.CharField(max_length=16)),
                        ("target_type", models.CharField(max_length=32)),
                        ("target_id", models.CharField(max_length=64)),
                        ("target_name", models.CharField(blank=True, max_length=255)),
                        (
                            "actor",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="tenancy.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "controlplane_auditevent",
                        "indexes": [
                            models.Index(fields=["organization", "-at"], name="audit_org_at")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
