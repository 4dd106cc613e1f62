"""The metadata API agents call (contract: AGENT_API.md).

Plain Django views rather than DRF: these are the hottest endpoints in the system and
carry no browsable or schema needs. Every call is authenticated by an agent key, which
names exactly one virtual cluster; nothing else is reachable from here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from . import metadata, services
from .agent_topics import (
    agents_heartbeat,
    group_offsets_commit,
    group_offsets_fetch,
    topics_alter_configs,
    topics_create,
    topics_create_partitions,
    topics_delete,
    topics_describe_configs,
    topics_list,
)
from .models import VirtualCluster

_KEY_CACHE_SECONDS = 5.0
_key_cache: dict[str, tuple[float, VirtualCluster | None]] = {}


class BadRequest(Exception):
    pass


def _cluster_for(request: HttpRequest) -> VirtualCluster | None:
    """The cluster of the request's agent key, cached briefly (revocation lag ≤ 5 s)."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return None
    plaintext = header[7:].strip()
    now = time.monotonic()
    cached = _key_cache.get(plaintext)
    if cached and cached[0] > now:
        return cached[1]
    key = services.agent_key_authenticate(plaintext)
    cluster = key.cluster if key else None
    if len(_key_cache) > 10_000:
        _key_cache.clear()
    _key_cache[plaintext] = (now + _KEY_CACHE_SECONDS, cluster)
    return cluster


def _endpoint(handler: Callable[[VirtualCluster, dict], dict]):
    @csrf_exempt
    @require_POST
    def view(request: HttpRequest) -> JsonResponse:
        cluster = _cluster_for(request)
        if cluster is None:
            return JsonResponse({"error": "missing, unknown or revoked agent key"}, status=401)
        try:
            body = json.loads(request.body or b"{}")
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            return JsonResponse(handler(cluster, body))
        except (ValueError, BadRequest, KeyError, TypeError) as exc:
            return JsonResponse({"error": f"bad request: {exc}"}, status=400)

    view.__name__ = handler.__name__
    return view


def _list(body: dict, name: str) -> list:
    value = body.get(name)
    if not isinstance(value, list):
        raise BadRequest(f"'{name}' must be a list")
    return value


@_endpoint
def register(cluster: VirtualCluster, body: dict) -> dict:
    return agents_heartbeat(cluster, body)


@_endpoint
def heartbeat(cluster: VirtualCluster, body: dict) -> dict:
    return agents_heartbeat(cluster, body)


@_endpoint
def commit(cluster: VirtualCluster, body: dict) -> dict:
    file_key = body.get("file_key")
    if not isinstance(file_key, str) or not file_key.startswith(cluster.public_id + "/"):
        raise BadRequest(f"file_key must be a string under '{cluster.public_id}/'")
    batches = _list(body, "batches")
    for batch in batches:
        for field in ("partition", "pos", "len", "records"):
            if not isinstance(batch.get(field), int):
                raise BadRequest(f"every batch needs an integer '{field}'")
    results = metadata.file_commit(
        cluster_id=cluster.pk, file_key=file_key, size=int(body.get("size", 0)), batches=batches
    )
    return {"batches": results}


@_endpoint
def fetch_plan(cluster: VirtualCluster, body: dict) -> dict:
    partitions = _list(body, "partitions")
    max_bytes = int(body.get("max_bytes", 50 * 1024 * 1024))
    return {
        "partitions": metadata.fetch_plan(
            cluster_id=cluster.pk, partitions=partitions, max_bytes=max_bytes
        )
    }


@_endpoint
def list_offsets(cluster: VirtualCluster, body: dict) -> dict:
    return {
        "partitions": metadata.list_offsets(
            cluster_id=cluster.pk, partitions=_list(body, "partitions")
        )
    }


@_endpoint
def delete_records(cluster: VirtualCluster, body: dict) -> dict:
    return {
        "partitions": metadata.records_delete(
            cluster_id=cluster.pk, partitions=_list(body, "partitions")
        )
    }


@_endpoint
def init_producer_id(cluster: VirtualCluster, body: dict) -> dict:
    producer_id, epoch = metadata.producer_id_init(
        cluster_id=cluster.pk, transactional_id=body.get("transactional_id")
    )
    return {"error_code": 0, "producer_id": producer_id, "producer_epoch": epoch}


@_endpoint
def topics_list_view(cluster: VirtualCluster, body: dict) -> dict:
    return topics_list(cluster, body.get("names"), body.get("topic_ids"))


@_endpoint
def topics_create_view(cluster: VirtualCluster, body: dict) -> dict:
    return topics_create(cluster, _list(body, "topics"), bool(body.get("validate_only")))


@_endpoint
def topics_delete_view(cluster: VirtualCluster, body: dict) -> dict:
    return topics_delete(cluster, body.get("names"), body.get("topic_ids"))


@_endpoint
def topics_create_partitions_view(cluster: VirtualCluster, body: dict) -> dict:
    return topics_create_partitions(cluster, _list(body, "topics"), bool(body.get("validate_only")))


@_endpoint
def topics_describe_configs_view(cluster: VirtualCluster, body: dict) -> dict:
    return topics_describe_configs(cluster, _list(body, "names"))


@_endpoint
def topics_alter_configs_view(cluster: VirtualCluster, body: dict) -> dict:
    return topics_alter_configs(
        cluster,
        _list(body, "topics"),
        bool(body.get("incremental")),
        bool(body.get("validate_only")),
    )


@_endpoint
def offsets_commit(cluster: VirtualCluster, body: dict) -> dict:
    return group_offsets_commit(cluster, str(body["group_id"]), _list(body, "offsets"))


@_endpoint
def offsets_fetch(cluster: VirtualCluster, body: dict) -> dict:
    return group_offsets_fetch(cluster, str(body["group_id"]), body.get("partitions"))
