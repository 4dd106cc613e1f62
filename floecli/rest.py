"""The control plane's REST API through urllib: an API key as bearer token, every call
bounded, the API's JSON error turned into one line."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from floecli.errors import CommandFailed

PAGE = 1000  # the API's largest page


def get_json(base_url: str, path: str, api_key: str, timeout_s: float) -> tuple[Any, Any]:
    """(body, headers) of GET base_url + path; CommandFailed on any failure."""
    request = urllib.request.Request(
        base_url.rstrip("/") + path,
        headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.load(response), response.headers
    except urllib.error.HTTPError as exc:
        try:
            reason = json.load(exc).get("error") or exc.reason
        except (ValueError, AttributeError):
            reason = exc.reason
        raise CommandFailed(f"GET {path}: HTTP {exc.code}: {reason}") from None
    except urllib.error.URLError as exc:
        raise CommandFailed(f"control plane unreachable at {base_url}: {exc.reason}") from None
    except (TimeoutError, OSError, ValueError) as exc:
        raise CommandFailed(f"control plane at {base_url}: {exc}") from None


def get_all(base_url: str, path: str, api_key: str, timeout_s: float) -> list[Any]:
    """Every item of a paged list (``?limit=&offset=``, ``X-Total-Count``)."""
    items: list[Any] = []
    while True:
        sep = "&" if "?" in path else "?"
        page, headers = get_json(
            base_url, f"{path}{sep}limit={PAGE}&offset={len(items)}", api_key, timeout_s
        )
        items.extend(page)
        total = int(headers.get("X-Total-Count") or len(items))
        if not page or len(items) >= total:
            return items


def cluster_path(cluster_id: str, tail: str) -> str:
    return f"/api/v1/clusters/{quote(cluster_id, safe='')}/{tail}"
