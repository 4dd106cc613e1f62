"""Serializers for SASL credentials and ACLs (shapes only; rules live in the services)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import ModelSerializer, Serializer
from virtualclusters.security.models import Acl, SaslCredential
from virtualclusters.security.services import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    USERNAME,
    USERNAME_RULE,
)


class SaslCredentialSerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)
    cluster = serializers.CharField(source="cluster.public_id", read_only=True)
    mechanisms = serializers.SerializerMethodField()

    class Meta:
        model = SaslCredential
        fields = ["id", "cluster", "username", "superuser", "read_only", "mechanisms", "created_at"]
        read_only_fields = fields

    def get_mechanisms(self, credential: SaslCredential) -> list[str]:
        return credential.mechanisms


class SaslCredentialCreateSerializer(StrictSerializer):
    username = serializers.RegexField(
        rf"^{USERNAME.pattern}$",
        max_length=128,
        help_text=f"{USERNAME_RULE}.",
        error_messages={"invalid": f"A username is {USERNAME_RULE}."},
    )
    password = serializers.RegexField(
        # Blank ("" = generate one) is allow_blank's own schema branch, not the pattern's.
        rf"^[^\x00]{{{MIN_PASSWORD_LENGTH},{MAX_PASSWORD_LENGTH}}}$",
        error_messages={
            "invalid": f"A password needs {MIN_PASSWORD_LENGTH}-{MAX_PASSWORD_LENGTH} "
            "characters and no NUL (or leave it out to get a generated one)."
        },
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_PASSWORD_LENGTH,
        write_only=True,
        help_text="Leave out to get a generated password (returned once).",
    )
    superuser = serializers.BooleanField(required=False, default=False)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:

        # Declared here: as a class attribute, "read_only" would shadow the flag every DRF
        # field (a serializer too) has by that name.
        fields = super().get_fields()
        fields["read_only"] = serializers.BooleanField(required=False, default=False)
        return fields


class SaslCredentialCreatedSerializer(SaslCredentialSerializer):
    password = serializers.CharField(
        read_only=True, help_text="The password. Shown once; store it now."
    )

    class Meta(SaslCredentialSerializer.Meta):
        fields = [*SaslCredentialSerializer.Meta.fields, "password"]
        read_only_fields = fields


class AclSerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)
    cluster = serializers.CharField(source="cluster.public_id", read_only=True)

    class Meta:
        model = Acl
        fields = ["id", "cluster", *Acl.BINDING_FIELDS, "created_at"]
        read_only_fields = fields


def _choices(field: str) -> list[str]:
    return [value for value, _ in Acl.choices_of(field)]


class AclQuerySerializer(Serializer):
    """Optional equality filters of the ACL list."""

    resource_type = serializers.CharField(required=False, max_length=32, trim_whitespace=False)
    resource_name = serializers.CharField(required=False, max_length=255, trim_whitespace=False)
    principal = serializers.CharField(required=False, max_length=255, trim_whitespace=False)


class AclCreateSerializer(StrictSerializer):
    resource_type = serializers.ChoiceField(choices=_choices("resource_type"))
    resource_name = serializers.CharField(
        max_length=255, help_text="A name, '*' for all, or a prefix (pattern_type 'prefixed')"
    )
    pattern_type = serializers.ChoiceField(choices=_choices("pattern_type"), default="literal")
    principal = serializers.RegexField(
        r"^User:[^\x00\n]{1,250}$",
        max_length=255,
        trim_whitespace=False,
        help_text="'User:<name>' or 'User:*'",
        error_messages={"invalid": "A principal looks like 'User:<name>' (or 'User:*')."},
    )
    host = serializers.CharField(max_length=255, default="*")
    operation = serializers.ChoiceField(choices=_choices("operation"))
    permission = serializers.ChoiceField(choices=_choices("permission"), default="allow")
