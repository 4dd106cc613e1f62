"""Organization, Membership and Invitation move here from controlplane: state only,
their tables (controlplane_organization, …) and rows stay as they are."""

import django.db.models.deletion
import tenancy.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("controlplane", "0003_api_key_owner_role"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Organization",
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
                                default=tenancy.models._org_id,
                                editable=False,
                                max_length=32,
                                unique=True,
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "controlplane_organization",
                    },
                ),
                migrations.CreateModel(
                    name="Invitation",
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
                                default=tenancy.models._invitation_id,
                                editable=False,
                                max_length=32,
                                unique=True,
                            ),
                        ),
                        ("email", models.EmailField(max_length=254)),
                        (
                            "role",
                            models.CharField(
                                choices=[
                                    ("owner", "Owner"),
                                    ("admin", "Admin"),
                                    ("member", "Member (read-only)"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("digest", models.CharField(max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("accepted_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
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
                                related_name="invitations",
                                to="tenancy.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "controlplane_invitation",
                    },
                ),
                migrations.CreateModel(
                    name="Membership",
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
                            "role",
                            models.CharField(
                                choices=[
                                    ("owner", "Owner"),
                                    ("admin", "Admin"),
                                    ("member", "Member (read-only)"),
                                ],
                                default="member",
                                max_length=16,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to="tenancy.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "controlplane_membership",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("organization", "user"), name="one_membership_per_org"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
