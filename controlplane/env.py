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


# Bounds every connection of the control plane gets unless the URL names its own: a host
# that does not answer is given up after CONNECT_TIMEOUT_S (libpq applies it per host, then
# tries the next one of a multi-host URL), and a connection whose peer vanished without a
# word (a machine lost, a partition) is found dead by TCP keepalives within ~11 s instead
# of the kernel's two hours.
CONNECT_DEFAULTS = {
    "connect_timeout": "3",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
}


def database_from_url(url: str) -> dict:
    """Django's DATABASES entry for a ``postgres://`` / ``postgresql://`` URL.

    A ``host`` query parameter (a socket folder) wins over the network location, as libpq
    does, so the embedded server's socket URL works too. Several hosts, as libpq takes
    them (``postgres://u@h1:5432,h2:5432,h3/floe?target_session_attrs=read-write``),
    become comma-separated HOST and PORT lists that psycopg hands to libpq, which tries
    them in turn and skips a host that is down or (with ``target_session_attrs``) not the
    primary: after a failover every new connection finds the new primary by itself.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unbalanced IPv6 bracket
        raise ImproperlyConfigured(f"DATABASE_URL is not a URL: {exc}") from None
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(
            f"DATABASE_URL must start with postgres:// or postgresql://, got {parts.scheme!r}"
        )
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    name = unquote(parts.path.lstrip("/")) or "postgres"
    hosts, ports = _hosts_and_ports(parts.netloc.rpartition("@")[2])
    host = query.pop("host", None) or ",".join(hosts)
    port = query.pop("port", None) or ",".join(ports)
    if not any(ports):
        port = ""
    for key, value in CONNECT_DEFAULTS.items():
        query.setdefault(key, value)
    if len(hosts) > 1:  # a replica answers reads only: the metadata store must write
        query.setdefault("target_session_attrs", "read-write")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": port,
        "OPTIONS": query,
    }


def _hosts_and_ports(netloc: str) -> tuple[list[str], list[str]]:
    """``h1:5432,[::1]:5433,h3`` → (["h1", "::1", "h3"], ["5432", "5433", ""])."""
    hosts: list[str] = []
    ports: list[str] = []
    for item in netloc.split(",") if netloc else []:
        if item.startswith("["):  # an IPv6 address: [addr] or [addr]:port
            address, bracket, rest = item[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise ImproperlyConfigured(f"DATABASE_URL has an invalid host {item!r}")
            host, port = address, rest[1:]
        else:
            host, _, port = item.partition(":")
        if not host:
            raise ImproperlyConfigured(f"DATABASE_URL has an empty host in {netloc!r}")
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ImproperlyConfigured(f"DATABASE_URL has an invalid port in {item!r}")
        hosts.append(unquote(host))
        ports.append(port)
    if any(ports) and not all(ports):
        # libpq pairs the lists by position; one port alone would apply to every host.
        ports = [port or "5432" for port in ports]
    return hosts, ports
