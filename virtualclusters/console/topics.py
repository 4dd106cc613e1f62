"""A topic's page: its partitions (start and end offsets), its configs, and a message
browser that reads records through a live agent of the cluster, over the channel the
agent opens (`virtualclusters.record_browser`): the control plane holds no bucket
credentials and never connects to an agent."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any, overload

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from metadata_store.models import Topic
from metadata_store.topic_configs import MAX_PARTITIONS, effective_configs
from metadata_store.topics import TopicError, topic_configs_alter, topic_create, topic_delete
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.record_browser import BrowseNotFound, BrowseUnavailable, records_browse
from virtualclusters.tables.models import TopicTable
from virtualclusters.tables.topic_tables import topic_table_state

FORMATS = ("auto", "json", "text", "hex")
DEFAULT_LIMIT = 20


def show(data: str | None, how: str) -> tuple[str, str]:
    """``(kind, text)`` of base64 ``data`` as ``how`` says: ``auto`` is JSON when it
    parses, text when it is UTF-8, else hex (`show_decoded` first reads it through the
    schema registry when it is framed with a schema id)."""
    if data is None:
        return "null", "null"
    raw = base64.b64decode(data)
    if how in ("auto", "json"):
        try:
            return "json", json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
        except ValueError:
            if how == "json":
                return "error", "not JSON: " + binascii.hexlify(raw, " ").decode()
    if how in ("auto", "text"):
        try:
            return "text", raw.decode("utf-8")
        except UnicodeDecodeError:
            if how == "text":
                return "error", "not UTF-8: " + binascii.hexlify(raw, " ").decode()
    return "hex", binascii.hexlify(raw, " ").decode()


def show_decoded(
    data: str | None, decoded: dict[str, Any] | None, how: str
) -> tuple[str, str, dict[str, Any] | None]:
    """``(kind, text, schema)`` of a key or value: framed with a schema id and shown
    ``auto``, its decoded JSON (kind ``schema``) and ``schema`` = ``{subject, version,
    schema_id, schema_type}`` — or, undecodable, hex and ``schema`` = ``{schema_id,
    error}``; otherwise as `show` says and no ``schema``."""
    if how != "auto" or decoded is None or data is None:
        return (*show(data, how), None)
    if decoded["error"] is not None:
        return "hex", show(data, "hex")[1], decoded
    text = json.dumps(decoded["json"], indent=2, ensure_ascii=False)
    return "schema", text, {k: v for k, v in decoded.items() if k != "json"}


@overload
def _int(value: str | None, default: int, low: int, high: int) -> int: ...
@overload
def _int(value: str | None, default: None, low: int, high: int) -> int | None: ...


def _int(value: str | None, default: int | None, low: int, high: int) -> int | None:
    try:
        number = int(value) if value not in (None, "") else default
    except ValueError:
        return default
    return None if number is None else max(low, min(high, number))


def _time_ms(value: str | None) -> tuple[str, int | None]:
    """``(shown, ms since the epoch)`` of a ``datetime-local`` value read as UTC; an empty
    or unreadable value is ``("", None)``."""
    try:
        when = datetime.fromisoformat((value or "").strip())
    except ValueError:
        return "", None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    shown = when.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return shown, int(when.timestamp() * 1000)


@login_required
@require_GET
def topic_detail(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    topic = get_object_or_404(Topic.objects.filter(cluster=cluster), name=name)
    partitions: list[Any] = list(topic.partitions.order_by("index"))  # given `messages`
    for p in partitions:
        p.messages = p.high_watermark - p.log_start_offset
    how = request.GET.get("format", "auto")
    how = how if how in FORMATS else "auto"
    query: dict[str, Any] = {
        "partition": _int(request.GET.get("partition"), 0, 0, max(topic.partition_count - 1, 0)),
        "offset": _int(request.GET.get("offset"), None, 0, 2**62),
        "limit": _int(request.GET.get("limit"), DEFAULT_LIMIT, 1, 500),
        "format": how,
    }
    query["time"], timestamp = _time_ms(request.GET.get("time"))
    if timestamp is not None:
        query["offset"] = None  # by time, the agent finds the offset
    browsed, problem, status = None, None, 200
    try:
        browsed = records_browse(
            cluster, topic=topic.name, partition=query["partition"], offset=query["offset"],
            limit=query["limit"], timestamp=timestamp,
        )  # fmt: skip
    except BrowseNotFound as exc:
        problem = str(exc)
    except BrowseUnavailable as exc:
        problem = str(exc)
        # The page itself is fine; a gateway status says an agent failed or was silent.
        status = exc.status if exc.status in (502, 504) else 200
    records = []
    for record in (browsed or {}).get("records", []):
        key_kind, key, key_schema = show_decoded(record["key"], record.get("key_decoded"), how)
        value_kind, value, value_schema = show_decoded(
            record["value"], record.get("value_decoded"), how
        )
        when = datetime.fromtimestamp(record["timestamp"] / 1000, tz=UTC)
        records.append(
            {
                "offset": record["offset"],
                "time": when,
                "time_text": when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],  # to the ms
                "key": key,
                "key_kind": key_kind,
                "key_schema": key_schema,
                "value": value,
                "value_kind": value_kind,
                "value_schema": value_schema,
                "headers": [(n, show(v, "text" if how == "auto" else how)[1])
                            for n, v in record["headers"]],
            }
        )  # fmt: skip
    if query["offset"] is None and timestamp is None:
        records.reverse()  # newest first
    context = {
        "cluster": cluster,
        "topic": topic,
        "partitions": partitions,
        "configs": effective_configs(
            topic.configs,
            default_retention_ms=cluster.default_retention_ms,
            default_topic_type=cluster.default_topic_type,
        ),
        "query": query,
        "formats": FORMATS,
        "records": records,
        "problem": problem,
        "agent": (browsed or {}).get("agent"),
        **_table_context(topic),
    }
    return render(request, "console/topic.html", context, status=status)


def _table_context(topic: Topic) -> dict[str, Any]:
    """The topic's Iceberg table, if it is kept as one: its state (snapshot, lag, files,
    the first backfill's progress) and queries to copy (PyIceberg, DuckDB)."""
    kept = TopicTable.objects.filter(topic=topic).select_related("table__namespace").first()
    if kept is None:
        return {
            "table": None,
            "table_put": f"/api/v1/clusters/{topic.cluster.public_id}/topics/{topic.name}/table/",
        }
    state = topic_table_state(kept)
    query = (
        "from pyiceberg.catalog.rest import RestCatalog\n"
        f'catalog = RestCatalog("floe", uri="{state["catalog_url"]}", token="<api key>")\n'
        f'catalog.load_table("{state["namespace"]}.{state["table"]}").scan().to_arrow()'
    )
    duckdb = (
        "INSTALL iceberg; LOAD iceberg;\n"
        "CREATE SECRET floe (TYPE iceberg, TOKEN '<api key>');\n"
        f"ATTACH 'floe' AS floe (TYPE iceberg, ENDPOINT '{state['catalog_url']}', SECRET floe);\n"
        f'SELECT count(*) FROM floe."{state["namespace"]}"."{state["table"]}";'
    )
    return {"table": state, "table_query": query, "table_query_duckdb": duckdb}


@login_required
@require_POST
def topic_new(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """Create a topic (name, partitions: empty for the cluster's default)."""
    cluster = cluster_or_404(request, cluster_id)
    name = request.POST.get("name", "").strip()
    partitions = _int(request.POST.get("partitions"), -1, -1, MAX_PARTITIONS)
    try:
        topic = topic_create(cluster=cluster, name=name, num_partitions=partitions)
    except TopicError as exc:
        messages.error(request, exc.message)
        return redirect("cluster-detail", cluster_id=cluster.public_id)
    messages.success(request, f"Topic {topic.name} created.")
    return redirect("topic-detail", cluster_id=cluster.public_id, name=topic.name)


@login_required
@require_POST
def topic_config(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    """Set one config override, or remove it (an empty value)."""
    cluster = cluster_or_404(request, cluster_id)
    topic = get_object_or_404(Topic.objects.filter(cluster=cluster), name=name)
    config, value = request.POST.get("config", ""), request.POST.get("value", "").strip()
    op = (
        {"name": config, "op": "set", "value": value} if value else {"name": config, "op": "delete"}
    )
    try:
        topic_configs_alter(topic=topic, ops=[op], incremental=True)
    except TopicError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"{config} {'set to ' + value if value else 'back to its default'}."
        )
    return redirect(reverse("topic-detail", args=[cluster.public_id, topic.name]) + "#configs")


@login_required
@require_POST
def topic_remove(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    """Delete a topic and its offsets; the person types its name to confirm."""
    cluster = cluster_or_404(request, cluster_id)
    topic = get_object_or_404(Topic.objects.filter(cluster=cluster), name=name)
    if request.POST.get("confirm_name", "").strip() != topic.name:
        messages.error(request, "Type the topic's name to confirm deletion.")
        return redirect("topic-detail", cluster_id=cluster.public_id, name=topic.name)
    topic_delete(topic=topic)
    messages.success(request, f"Topic {name} deleted.")
    return redirect("cluster-detail", cluster_id=cluster.public_id)
