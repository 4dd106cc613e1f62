"""Who may do what: one rule per action, the same for the console and the REST API.

A request is an action named by its URL (the console's page or the REST API's
operation) and its method. Reading needs any role; changing needs an admin; the actions
in `OWNER_ONLY` need the owner; `OPEN` console forms (signing up, in or out, accepting an
invitation, switching organization) change no organization and need none. The console's
middleware (``tenancy.console.scope.RolePermissions``) and the REST API's permission class
(``team.api.auth.ApiKeyPermission``) both ask `allows`; an API key's role is the lower of its
own and its owner's current role (`lower`).
"""

from __future__ import annotations

from tenancy.models import Membership

Role = Membership.Role
RANK: dict[str | None, int] = {Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# What only an owner may do, and the URL names it has in the console and the REST API.
OWNER_ONLY = {
    "change the plan": frozenset({"billing-plan", "api-billing-plan"}),
    "set the budget": frozenset({"billing-budget", "api-billing-budget"}),
}
_OWNER_ONLY_URLS = {name: action for action, names in OWNER_ONLY.items() for name in names}
# Console forms that change no organization: anyone may send them.
OPEN = frozenset(
    {
        "login",
        "logout",
        "signup",
        "signup-finish",
        "invitation-accept",
        "invitation-account",
        "org-switch",
    }
)


def required_role(url_name: str | None, method: str) -> str | None:
    """The least role that may send `method` to the URL named `url_name` (None: any)."""
    if url_name in OPEN:
        return None
    if method.upper() in SAFE_METHODS:
        return Role.MEMBER
    if url_name in _OWNER_ONLY_URLS:
        return Role.OWNER
    return Role.ADMIN


def allows(role: str | None, url_name: str | None, method: str) -> bool:
    """Whether a member (or key) with `role` may send `method` to the URL `url_name`."""
    needed = required_role(url_name, method)
    return needed is None or RANK.get(role, 0) >= RANK[needed]


def refusal(url_name: str | None) -> str:
    """Why `allows` said no, in a sentence."""
    action = _OWNER_ONLY_URLS.get(url_name or "")
    if action:
        return f"Only owners {action}."
    return "This role is read-only: ask an owner or an admin to make changes."


def lower(first: str | None, second: str | None) -> str | None:
    """The lower of two roles (None, no role, is lowest)."""
    if first is None or second is None:
        return None
    return first if RANK[first] <= RANK[second] else second


def at_most(role: str, ceiling: str | None) -> bool:
    return RANK.get(role, 0) <= RANK.get(ceiling, 0)
