"""The web console's pages: the project's own (accounts, team, audit, API keys) and each
app's, included from its ``urls``. Public ids only in URLs; every write is a POST."""

from django.urls import include, path

from controlplane.console import accounts, api_keys, team
from controlplane.console import audit as console_audit

urlpatterns = [
    path("signup", accounts.signup, name="signup"),
    path("login", accounts.log_in, name="login"),
    path("logout", accounts.log_out, name="logout"),
    path("", include("virtualclusters.console.urls")),  # dashboard, clusters and their pages
    path("team", team.team_page, name="team"),
    path("audit", console_audit.audit_log, name="audit-log"),
    path("team/members/<str:email>", team.member_change, name="team-member"),
    path("invite/<str:token>", team.invitation_accept, name="invitation-accept"),
    path("orgs/switch", team.org_switch, name="org-switch"),
    path("api-keys", api_keys.api_key_list, name="console-api-keys"),
    path("api-keys/new", api_keys.api_key_create, name="console-api-key-create"),
    path("api-keys/<str:key_id>/revoke", api_keys.api_key_revoke, name="console-api-key-revoke"),
    path("", include("billing.console_urls")),
]
