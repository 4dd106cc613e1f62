"""The team's console URLs (the project's ``console_urls`` includes them at the root)."""

from django.urls import path

from team.console import accounts, api_keys, team
from team.console import audit as console_audit

urlpatterns = [
    path("signup", accounts.signup, name="signup"),
    path("signup/<str:signed>", accounts.signup_finish, name="signup-finish"),
    path("login", accounts.log_in, name="login"),
    path("logout", accounts.log_out, name="logout"),
    path("team", team.team_page, name="team"),
    path("audit", console_audit.audit_log, name="audit-log"),
    path("team/members/<str:email>", team.member_change, name="team-member"),
    path("invite/account/<str:signed>", team.invitation_account, name="invitation-account"),
    path("invite/<str:token>", team.invitation_accept, name="invitation-accept"),
    path("orgs/switch", team.org_switch, name="org-switch"),
    path("api-keys", api_keys.api_key_list, name="console-api-keys"),
    path("api-keys/new", api_keys.api_key_create, name="console-api-key-create"),
    path("api-keys/<str:key_id>/revoke", api_keys.api_key_revoke, name="console-api-key-revoke"),
]
