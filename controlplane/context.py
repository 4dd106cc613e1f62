"""Template context for every console page."""

from .services import organization_for_user


def console(request) -> dict:
    user = getattr(request, "user", None)
    return {"current_org": organization_for_user(user) if user is not None else None}
