"""The cluster's Iceberg catalog: namespaces, tables, and commits applied with their
requirements (the Iceberg REST Catalog API's semantics; its wire side: ``catalog_views``).

The catalog holds, per table, the pointer to its current metadata file and that
metadata's document; commits are applied to the document here (PyIceberg's own update
rules) and the new metadata file's location is handed back. Data files and manifests
are written by the committer, with its own credentials, in the cluster's bucket under
the table's location; the control plane never opens the bucket (invariant 6). The
metadata file itself is written at the location the commit answered by whoever holds
the bucket's credentials: the append job does it after each of its commits
(``jobs/table_append.py``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import IntegrityError, transaction
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import update_table_metadata

from core.storage import object_location
from virtualclusters.models import VirtualCluster
from virtualclusters.tables.models import IcebergNamespace, IcebergTable

NAMESPACE_SEPARATOR = "\x1f"  # how the REST API joins a multi-level namespace in a path


class CatalogError(Exception):
    """An answer of the Iceberg REST API's error model: HTTP `code`, Iceberg's `kind`
    (``NoSuchTableException``, ``CommitFailedException``…) and a sentence."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message


def _no_namespace(name: str) -> CatalogError:
    return CatalogError(404, "NoSuchNamespaceException", f"Namespace does not exist: {name}")


def _no_table(namespace: str, name: str) -> CatalogError:
    return CatalogError(404, "NoSuchTableException", f"Table does not exist: {namespace}.{name}")


def namespace_name(levels: list[str]) -> str:
    """The stored name of a namespace given as its levels (each non-empty, no '.')."""
    if not levels or any(not level or "." in level for level in levels):
        raise CatalogError(400, "BadRequestException", f"bad namespace {levels!r}"[:300])
    name = ".".join(levels)
    if len(name) > 255 or "\x00" in name:
        raise CatalogError(400, "BadRequestException", "a namespace has at most 255 characters")
    return name


def table_root(cluster: VirtualCluster, namespace: str, name: str) -> tuple[str, dict[str, str]]:
    """The location of a new table in the cluster's bucket, and the FileIO properties a
    reader or writer needs to reach it (no credentials)."""
    if not cluster.bucket_url:
        raise CatalogError(
            400, "BadRequestException", "the cluster has no bucket yet: start an agent first"
        )
    key = f"{cluster.public_id}/tables/{namespace}/{name}-{uuid.uuid4().hex[:8]}"
    try:
        return object_location(cluster.bucket_url, key)
    except ValueError as exc:
        raise CatalogError(
            400, "BadRequestException", f"tables need a file:// or s3:// bucket: {exc}"
        ) from None


def catalog_properties(cluster: VirtualCluster) -> dict[str, str]:
    """What ``GET /v1/config`` overrides: the FileIO properties of the cluster's bucket."""
    if not cluster.bucket_url:
        return {}
    try:
        return object_location(cluster.bucket_url, "_")[1]
    except ValueError:
        return {}


# --- namespaces ---------------------------------------------------------------------


def namespaces_list(cluster: VirtualCluster, *, parent: str = "") -> list[list[str]]:
    names = IcebergNamespace.objects.filter(cluster=cluster).order_by("name")
    if parent:
        names = names.filter(name__startswith=parent + ".")
    depth = parent.count(".") + 2 if parent else 1
    prefixes = {tuple(n.split(".")[:depth]) for n in names.values_list("name", flat=True)}
    return [list(levels) for levels in sorted(prefixes)]


def namespace_get(cluster: VirtualCluster, name: str) -> IcebergNamespace:
    found = IcebergNamespace.objects.filter(cluster=cluster, name=name).first()
    if found is None:
        raise _no_namespace(name)
    return found


def namespace_create(
    *, cluster: VirtualCluster, name: str, properties: dict[str, str] | None = None
) -> IcebergNamespace:
    try:
        with transaction.atomic():
            return IcebergNamespace.objects.create(
                cluster=cluster, name=name, properties=properties or {}
            )
    except IntegrityError:
        raise CatalogError(
            409, "AlreadyExistsException", f"Namespace already exists: {name}"
        ) from None


def namespace_ensure(*, cluster: VirtualCluster, name: str) -> IcebergNamespace:
    namespace, _ = IcebergNamespace.objects.get_or_create(cluster=cluster, name=name)
    return namespace


def namespace_drop(*, cluster: VirtualCluster, name: str) -> None:
    namespace = namespace_get(cluster, name)
    if namespace.tables.exists():
        raise CatalogError(409, "NamespaceNotEmptyException", f"Namespace is not empty: {name}")
    namespace.delete()


# --- tables -------------------------------------------------------------------------


def tables_list(cluster: VirtualCluster, namespace: str) -> list[str]:
    return list(
        namespace_get(cluster, namespace).tables.order_by("name").values_list("name", flat=True)
    )


def table_get(cluster: VirtualCluster, namespace: str, name: str) -> IcebergTable:
    found = (
        IcebergTable.objects.filter(
            namespace__cluster=cluster, namespace__name=namespace, name=name
        )
        .select_related("namespace")
        .first()
    )
    if found is None:
        raise _no_table(namespace, name)
    return found


# Iceberg's table properties that tell a writer where to put files.
PATH_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


def _within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or under it, spelled plainly: no ``.``/``..`` segment,
    no escape (``%``, a backslash) that a FileIO might read as one."""
    if "%" in path or "\\" in path:
        return False
    scheme, sep, rest = path.partition("://")
    if not sep or any(part in (".", "..") for part in rest.split("/")):
        return False
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


def _check_paths(metadata: TableMetadata, *, root: str) -> None:
    """A table's files stay under its own prefix in its cluster's bucket: its location,
    the paths its properties give writers and its snapshots' manifest lists — otherwise a
    commit could point a writer (and the orphan sweep) at another cluster's folder."""
    moved = [("location", metadata.location)] if not _within(metadata.location, root) else []
    moved += [
        (key, metadata.properties[key])
        for key in PATH_PROPERTIES
        if key in metadata.properties and not _within(metadata.properties[key], root)
    ]
    moved += [
        (f"snapshot {snapshot.snapshot_id}'s manifest list", snapshot.manifest_list)
        for snapshot in metadata.snapshots
        if not _within(snapshot.manifest_list, root)
    ]
    if moved:
        what, where = moved[0]
        raise CatalogError(
            403,
            "ForbiddenException",
            f"{what} {where!r} is outside the table's own prefix {root!r}"[:500],
        )


def _metadata_file(location: str, version: int) -> str:
    return f"{location}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"


def _document(metadata: TableMetadata) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(metadata.model_dump_json())
    return document


def table_create(
    *,
    cluster: VirtualCluster,
    namespace: str,
    name: str,
    schema: Schema,
    partition_spec: PartitionSpec | None = None,
    sort_order: SortOrder | None = None,
    properties: dict[str, str] | None = None,
) -> IcebergTable:
    """A new table at a location of the catalog's choosing in the cluster's bucket
    (a location the client asks for is not honoured: it could lie outside the bucket)."""
    parent = namespace_get(cluster, namespace)
    if not name or "/" in name or name.startswith(".") or len(name) > 200 or "\x00" in name:
        raise CatalogError(400, "BadRequestException", f"bad table name {name!r}"[:300])
    location, _ = table_root(cluster, namespace, name)
    metadata = new_table_metadata(
        schema=schema,
        partition_spec=partition_spec or UNPARTITIONED_PARTITION_SPEC,
        sort_order=sort_order or UNSORTED_SORT_ORDER,
        location=location,
        properties=dict(properties or {}),
    )
    _check_paths(metadata, root=location)
    try:
        with transaction.atomic():
            return IcebergTable.objects.create(
                namespace=parent,
                name=name,
                metadata_location=_metadata_file(location, 0),
                metadata=_document(metadata),
            )
    except IntegrityError:
        raise CatalogError(
            409, "AlreadyExistsException", f"Table already exists: {namespace}.{name}"
        ) from None


def table_metadata(table: IcebergTable) -> TableMetadata:
    return TableMetadataUtil.parse_obj(table.metadata)


@transaction.atomic
def table_commit(
    *, cluster: VirtualCluster, namespace: str, name: str, request: CommitTableRequest
) -> IcebergTable:
    """Apply a commit if every requirement holds against the current metadata (409
    ``CommitFailedException`` otherwise): one row lock serializes a table's commits."""
    table = (
        IcebergTable.objects.select_for_update()
        .filter(namespace__cluster=cluster, namespace__name=namespace, name=name)
        .first()
    )
    if table is None:
        raise _no_table(namespace, name)
    base = table_metadata(table)
    try:
        for requirement in request.requirements:
            requirement.validate(base)
    except CommitFailedException as exc:
        raise CatalogError(409, "CommitFailedException", str(exc)) from None
    try:
        updated = update_table_metadata(
            base,
            request.updates,
            enforce_validation=True,
            metadata_location=table.metadata_location,
        )
    except (ValueError, TypeError) as exc:
        raise CatalogError(400, "BadRequestException", f"cannot apply the updates: {exc}") from None
    _check_paths(updated, root=base.location)
    version = int(table.metadata_location.rsplit("/", 1)[-1].split("-", 1)[0]) + 1
    table.metadata = _document(updated)
    table.metadata_location = _metadata_file(updated.location, version)
    table.save(update_fields=["metadata", "metadata_location", "updated_at"])
    return table


def table_drop(*, cluster: VirtualCluster, namespace: str, name: str) -> None:
    """Forget a table (its files stay in the bucket); a topic's table stops appending."""
    table_get(cluster, namespace, name).delete()
