"""``/agent/v1/`` calls for SASL verifiers and ACLs (docs/AGENT_API.md)."""

from django.urls import path

from virtualclusters.security import agent_api as s

urlpatterns = [
    path("sasl/credential", s.sasl_credential),
    path("sasl/scram-describe", s.scram_credentials_describe),
    path("sasl/scram-alter", s.scram_credentials_alter),
    path("acls/list", s.acls_list),
    path("acls/create", s.acls_create),
    path("acls/describe", s.acls_describe),
    path("acls/delete", s.acls_delete),
]
