"""``/agent/v1/registry/…``: the Schema Registry's agent-API calls (docs/AGENT_API.md)."""

from django.urls import path

from schema_registry import agent_api as r

urlpatterns = [
    path("registry/register", r.registry_register),
    path("registry/versions", r.registry_versions),
    path("registry/subjects", r.registry_subjects),
    path("registry/schema", r.registry_schema),
    path("registry/schema_uses", r.registry_schema_uses),
    path("registry/referenced_by", r.registry_referenced_by),
    path("registry/delete_subject", r.registry_delete_subject),
    path("registry/delete_version", r.registry_delete_version),
    path("registry/config_get", r.registry_config_get),
    path("registry/config_set", r.registry_config_set),
    path("registry/config_delete", r.registry_config_delete),
    path("registry/mode_get", r.registry_mode_get),
    path("registry/mode_set", r.registry_mode_set),
    path("registry/mode_delete", r.registry_mode_delete),
]
