"""The REST API's shapes of a cluster's Schema Registry (`schema_registry.api.views`)."""

from __future__ import annotations

from rest_framework import serializers

from schema_registry.models import COMPATIBILITY_LEVELS, SCHEMA_TYPES
from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import Serializer


class SubjectSerializer(Serializer):
    name = serializers.CharField()
    versions = serializers.IntegerField(source="live_versions", help_text="Live versions.")
    latest_version = serializers.IntegerField(
        allow_null=True, help_text="The latest live version (null: every one soft-deleted)."
    )
    latest_id = serializers.IntegerField(allow_null=True, help_text="Its schema id.")
    schema_type = serializers.ChoiceField(
        source="latest_type", choices=SCHEMA_TYPES, allow_null=True
    )
    compatibility = serializers.ChoiceField(
        choices=COMPATIBILITY_LEVELS,
        allow_null=True,
        help_text="The subject's own level (null: the cluster's).",
    )


class ReferenceSerializer(Serializer):
    name = serializers.CharField()
    subject = serializers.CharField()
    version = serializers.IntegerField()


class VersionSerializer(Serializer):
    version = serializers.IntegerField()
    id = serializers.IntegerField(help_text="The schema id.")
    schema_type = serializers.ChoiceField(choices=SCHEMA_TYPES)
    references = ReferenceSerializer(many=True)
    deleted = serializers.BooleanField(help_text="Soft-deleted.")


class SubjectDetailSerializer(Serializer):
    name = serializers.CharField()
    compatibility = serializers.ChoiceField(
        choices=COMPATIBILITY_LEVELS, help_text="The level in force for the subject."
    )
    compatibility_own = serializers.ChoiceField(
        choices=COMPATIBILITY_LEVELS,
        allow_null=True,
        help_text="The subject's own level (null: it follows the cluster's).",
    )
    versions = serializers.IntegerField(help_text="Versions, soft-deleted ones included.")
    latest_version = serializers.IntegerField(
        allow_null=True, help_text="The latest live version (null: every one soft-deleted)."
    )


class VersionTextSerializer(VersionSerializer):
    schema = serializers.CharField(help_text="The schema's text, as registered.")
    referenced_by = serializers.ListField(
        child=serializers.IntegerField(), help_text="Ids of the schemas that reference it."
    )
    agent = serializers.CharField(help_text="The agent that read the text from the bucket.")


class SubjectPatchSerializer(StrictSerializer):
    compatibility = serializers.ChoiceField(
        choices=COMPATIBILITY_LEVELS,
        allow_null=True,
        help_text="The subject's own level; null: follow the cluster's.",
    )


class ConfigSerializer(StrictSerializer):
    compatibility = serializers.ChoiceField(
        choices=COMPATIBILITY_LEVELS, help_text="The cluster's level (subjects without one)."
    )


class DeleteQuerySerializer(Serializer):
    permanent = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Delete for good (what a soft delete left); else a soft delete.",
    )


class SubjectListQuerySerializer(Serializer):
    deleted = serializers.BooleanField(
        required=False,
        default=False,
        help_text="List subjects whose versions are all soft-deleted too.",
    )


class DeletedVersionsSerializer(Serializer):
    versions = serializers.ListField(child=serializers.IntegerField())
