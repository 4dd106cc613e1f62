"""The metadata API agents call (contract: AGENT_API.md).

Plain Django views rather than DRF: these are the hottest endpoints in the system and
carry no browsable or schema needs. Every call is authenticated by an agent key, which
names exactly one virtual cluster; nothing else is reachable from here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from . import agent_schemas as schemas
from . import metadata, services
from .agent_schemas import BadBody, as_dicts
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

log = logging.getLogger(__name__)

_KEY_CACHE_SECONDS = 5.0
# A commit of MAX_COMMIT_BATCHES entries is ~25 MB of JSON; the console's upload limit
# (DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB) would refuse big segments of small batches.
MAX_BODY_BYTES = 64 * 1024 * 1024
_key_cache: dict[str, tuple[float, VirtualCluster | None]] = {}


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


def error_response(status: int, message: str) -> JsonResponse:
    """Every agent-API error is a short JSON object, whatever DEBUG says."""
    return JsonResponse({"error": message}, status=status)


def endpoint(schema: type):
    """An agent-API view: POST only, agent key → cluster, body decoded and validated by
    `schema` (agent_schemas), then `handler(cluster, request)`. A body that does not fit
    is a 400 naming the field; a failure of ours is a 500 with a one-line JSON reason."""

    def wrap(handler: Callable[[VirtualCluster, object], dict]):
        @csrf_exempt
        def view(request: HttpRequest) -> JsonResponse:
            if request.method != "POST":
                return error_response(405, f"{request.method} is not allowed: use POST")
            cluster = _cluster_for(request)
            if cluster is None:
                return error_response(401, "missing, unknown or revoked agent key")
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_response(400, "bad request: Content-Length is not a number")
            if length > MAX_BODY_BYTES:
                return error_response(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
            try:
                # read(), not .body: the agent API has its own size limit (above).
                body = request.read(length) if length else b""
                return JsonResponse(handler(cluster, schemas.decode(body, schema)))
            except BadBody as exc:
                return error_response(400, f"bad request: {exc}")
            except Exception as exc:  # ours, or the database's: never the debug page
                log.exception("agent API %s failed", handler.__name__)
                return error_response(500, f"{handler.__name__} failed: {type(exc).__name__}")

        view.__name__ = handler.__name__
        return view

    return wrap


def unknown_call(request: HttpRequest) -> JsonResponse:
    return error_response(404, f"no agent API call at {request.path}")


@endpoint(schemas.HeartbeatRequest)
def register(cluster: VirtualCluster, body: schemas.HeartbeatRequest) -> dict:
    return agents_heartbeat(cluster, body)


@endpoint(schemas.HeartbeatRequest)
def heartbeat(cluster: VirtualCluster, body: schemas.HeartbeatRequest) -> dict:
    return agents_heartbeat(cluster, body)


@endpoint(schemas.CommitRequest)
def commit(cluster: VirtualCluster, body: schemas.CommitRequest) -> dict:
    schemas.validate_commit(body, cluster_prefix=cluster.public_id + "/")
    results = metadata.file_commit(
        cluster_id=cluster.pk, file_key=body.file_key, size=body.size, batches=body.batches
    )
    return {"batches": results}


@endpoint(schemas.FetchPlanRequest)
def fetch_plan(cluster: VirtualCluster, body: schemas.FetchPlanRequest) -> dict:
    return {
        "partitions": metadata.fetch_plan(
            cluster_id=cluster.pk, partitions=as_dicts(body.partitions), max_bytes=body.max_bytes
        )
    }


@endpoint(schemas.ListOffsetsRequest)
def list_offsets(cluster: VirtualCluster, body: schemas.ListOffsetsRequest) -> dict:
    return {
        "partitions": metadata.list_offsets(
            cluster_id=cluster.pk, partitions=as_dicts(body.partitions)
        )
    }


@endpoint(schemas.DeleteRecordsRequest)
def delete_records(cluster: VirtualCluster, body: schemas.DeleteRecordsRequest) -> dict:
    return {
        "partitions": metadata.records_delete(
            cluster_id=cluster.pk, partitions=as_dicts(body.partitions)
        )
    }


@endpoint(schemas.InitProducerIdRequest)
def init_producer_id(cluster: VirtualCluster, body: schemas.InitProducerIdRequest) -> dict:
    producer_id, epoch = metadata.producer_id_init(
        cluster_id=cluster.pk, transactional_id=body.transactional_id
    )
    return {"error_code": 0, "producer_id": producer_id, "producer_epoch": epoch}


@endpoint(schemas.TopicsListRequest)
def topics_list_view(cluster: VirtualCluster, body: schemas.TopicsListRequest) -> dict:
    return topics_list(cluster, body.names, body.topic_ids)


@endpoint(schemas.TopicsCreateRequest)
def topics_create_view(cluster: VirtualCluster, body: schemas.TopicsCreateRequest) -> dict:
    return topics_create(cluster, as_dicts(body.topics), body.validate_only)


@endpoint(schemas.TopicsDeleteRequest)
def topics_delete_view(cluster: VirtualCluster, body: schemas.TopicsDeleteRequest) -> dict:
    return topics_delete(cluster, body.names, body.topic_ids)


@endpoint(schemas.TopicsCreatePartitionsRequest)
def topics_create_partitions_view(
    cluster: VirtualCluster, body: schemas.TopicsCreatePartitionsRequest
) -> dict:
    return topics_create_partitions(cluster, as_dicts(body.topics), body.validate_only)


@endpoint(schemas.TopicsDescribeConfigsRequest)
def topics_describe_configs_view(
    cluster: VirtualCluster, body: schemas.TopicsDescribeConfigsRequest
) -> dict:
    return topics_describe_configs(cluster, body.names)


@endpoint(schemas.TopicsAlterConfigsRequest)
def topics_alter_configs_view(
    cluster: VirtualCluster, body: schemas.TopicsAlterConfigsRequest
) -> dict:
    return topics_alter_configs(
        cluster, as_dicts(body.topics), body.incremental, body.validate_only
    )


@endpoint(schemas.OffsetsCommitRequest)
def offsets_commit(cluster: VirtualCluster, body: schemas.OffsetsCommitRequest) -> dict:
    return group_offsets_commit(cluster, body.group_id, as_dicts(body.offsets))


@endpoint(schemas.OffsetsFetchRequest)
def offsets_fetch(cluster: VirtualCluster, body: schemas.OffsetsFetchRequest) -> dict:
    partitions = None if body.partitions is None else as_dicts(body.partitions)
    return group_offsets_fetch(cluster, body.group_id, partitions)
