"""Small, loud readers for settings that come from the environment.

Every helper raises ``ImproperlyConfigured`` with the variable's name when a value is
present but malformed, so a typo in a deployment fails at start-up, not at 3 a.m.

Kept hand-written (issue 26 weighed the settings libraries; none keeps both promises):
django-environ reads any word it does not know as false (``DEBUG=ture`` is quietly off),
raises a bare ``ValueError`` without the variable's name for a bad integer, and puts a
URL's ``?host=`` among the connection OPTIONS while the network location fills HOST, where
libpq (and this module) let ``?host=`` (the embedded server's socket folder) win;
dj-database-url covers only the URL; pydantic-settings is loud but raises its own
``ValidationError`` and brings a model class for five ten-line readers.
"""

from __future__ import annotations

import os
from typing import overload
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str) -> str | None: ...
@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None) -> str | None: ...


def env_str(name: str, default: str | None = None) -> str | None:
    """The variable as a string, or ``default`` when unset."""
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off``; anything else is an error."""
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer, optionally bounded below."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def database_from_url(url: str) -> dict:
    """Django's DATABASES entry for a ``postgres://`` / ``postgresql://`` URL.

    A ``host`` query parameter (a socket folder) wins over the network location, as libpq
    does, so the embedded server's socket URL works too.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(
            f"DATABASE_URL must start with postgres:// or postgresql://, got {parts.scheme!r}"
        )
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    name = unquote(parts.path.lstrip("/")) or "postgres"
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured("DATABASE_URL has an invalid port") from None
    host = query.pop("host", None) or parts.hostname or ""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": query,
    }
