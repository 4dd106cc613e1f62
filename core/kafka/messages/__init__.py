"""The registry of every API Floe speaks, and the versions ApiVersions advertises."""

from ..api_keys import ApiKey
from ..schema import Api
from . import admin, core, groups, security, share, transactions

APIS: dict[int, Api] = {
    api.key: api
    for module in (core, groups, admin, security, transactions, share)
    for api in module.APIS
}

# What ApiVersions advertises: exactly the declared (min, max) of each API.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    api.key: api.versions for api in sorted(APIS.values(), key=lambda api: api.key)
}

__all__ = ["APIS", "SUPPORTED_VERSIONS"]
