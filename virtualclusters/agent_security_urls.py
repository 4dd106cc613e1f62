"""``/agent/v1/`` calls for SASL verifiers and ACLs (included by ``agent_urls``)."""

from django.urls import path

from . import agent_security_api as s

urlpatterns = [
    path("sasl/credential", s.sasl_credential),
    path("acls/list", s.acls_list),
    path("acls/create", s.acls_create),
    path("acls/describe", s.acls_describe),
    path("acls/delete", s.acls_delete),
]
