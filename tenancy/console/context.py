"""Template context for every console page."""

from tenancy.console.scope import current_org, my_memberships


def console(request) -> dict:
    user = getattr(request, "user", None)
    if user is None:
        return {"current_org": None, "my_memberships": []}
    return {"current_org": current_org(request), "my_memberships": my_memberships(request)}
