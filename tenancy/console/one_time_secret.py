"""A secret shown once after a redirect (post/redirect/get).

The create view keeps the plaintext in the user's server-side session and redirects; the
next view of the page takes it out again, so a reload neither shows it twice nor creates a
second key. Pages showing it are marked ``no-store``.
"""

from __future__ import annotations

SESSION_KEY = "floe_one_time_secret"


def keep(request, kind: str, *, scope: str, key_id: str, plaintext: str) -> None:
    request.session[SESSION_KEY] = {
        "kind": kind,
        "scope": scope,
        "key_id": key_id,
        "plaintext": plaintext,
    }


def take(request, kind: str, *, scope: str = "") -> tuple[str, str] | None:
    """``(key_id, plaintext)`` kept for this kind of page, removed from the session."""
    kept = request.session.get(SESSION_KEY)
    if not kept or kept.get("kind") != kind or kept.get("scope") != scope:
        return None
    del request.session[SESSION_KEY]
    return kept["key_id"], kept["plaintext"]
