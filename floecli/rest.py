"""The control plane's REST API through urllib: an API key as bearer token, every call
bounded, the API's JSON error turned into one line."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from floecli.errors import BadInput, CommandFailed

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


def add_rest_arguments(parser: Any, *, title: str = "control plane") -> None:
    """--api-url, --cluster, --api-key (default $FLOE_API_KEY)."""
    rest = parser.add_argument_group(title)
    rest.add_argument(
        "--api-url", metavar="URL", help="the control plane, e.g. https://floe.example"
    )
    rest.add_argument("--cluster", metavar="ID", help="the cluster's id (vci_…)")
    rest.add_argument("--api-key", help="an API key (default: $FLOE_API_KEY)")


def rest_target(args: Any) -> tuple[str, str, str]:
    """(api_url, cluster id, API key) from the parsed arguments; BadInput if one is missing."""
    api_key = args.api_key or os.environ.get("FLOE_API_KEY", "")
    if not (args.api_url and args.cluster and api_key):
        raise BadInput("needs --api-url, --cluster and an API key (--api-key or FLOE_API_KEY)")
    return args.api_url, args.cluster, api_key


def cluster_bucket(args: Any, timeout_s: float) -> str:
    """--bucket, or the bucket URL the control plane has for the cluster."""
    if getattr(args, "bucket", None):
        return str(args.bucket)
    url, cluster, key = rest_target(args)
    body, _ = get_json(url, cluster_path(cluster, ""), key, timeout_s)
    if not body.get("bucket_url"):
        raise CommandFailed("the cluster has no bucket yet: give --bucket URL")
    return str(body["bucket_url"])
