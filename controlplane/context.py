"""Template context for every console page."""

from controlplane.console.tenancy import current_org


def console(request) -> dict:
    user = getattr(request, "user", None)
    return {"current_org": current_org(request) if user is not None else None}
