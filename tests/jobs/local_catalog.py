"""An Iceberg catalog in one JSON file, for tests and benchmarks of the table jobs
without a control plane: each table's metadata document and location, swapped under a
file lock only when the committer loaded the current one (a concurrent commit fails
with `CommitFailedException`, as the Floe catalog answers 409). Like the Floe catalog
it never writes the metadata file of a commit: the writer does (the jobs do)."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER


class FileCatalog(MetastoreCatalog):
    """Tables of the file:// warehouse `root`; the catalog is `root`/catalog.json."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        super().__init__("local", warehouse=root.resolve().as_uri())
        self._path = root / "catalog.json"

    def _tables(self) -> dict[str, Any]:
        return json.loads(self._path.read_text()) if self._path.exists() else {}

    def _swap(self, key: str, expected: str | None, location: str, metadata_json: str) -> None:
        with open(self._path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tables = self._tables()
            if tables.get(key, {}).get("location") != expected:
                raise CommitFailedException(f"{key}: another commit came first")
            tables[key] = {"location": location, "metadata": json.loads(metadata_json)}
            self._path.write_text(json.dumps(tables))

    def create_table(
        self, identifier, schema, location=None, partition_spec=None, properties=None, **_: Any
    ) -> Table:
        staged = self._create_staged_table(
            identifier,
            schema,
            location,
            partition_spec or UNPARTITIONED_PARTITION_SPEC,
            UNSORTED_SORT_ORDER,
            properties or {},
        )
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        key = ".".join(self.identifier_to_tuple(identifier))
        self._swap(key, None, staged.metadata_location, staged.metadata.model_dump_json())
        return self.load_table(identifier)

    def load_table(self, identifier) -> Table:
        identifier = self.identifier_to_tuple(identifier)
        found = self._tables().get(".".join(identifier))
        if found is None:
            raise NoSuchTableError(identifier)
        metadata = TableMetadataUtil.parse_obj(found["metadata"])
        io = load_file_io(self.properties, found["location"])
        return Table(identifier, metadata, found["location"], io, self)

    def commit_table(self, table, requirements, updates) -> CommitTableResponse:
        current = self.load_table(table.name())
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        self._swap(
            ".".join(table.name()),
            current.metadata_location,
            staged.metadata_location,
            staged.metadata.model_dump_json(),
        )
        return CommitTableResponse(
            metadata=staged.metadata, metadata_location=staged.metadata_location
        )

    def load_namespace_properties(self, namespace) -> dict[str, str]:
        return {}  # tables go under the warehouse: <namespace>.db/<table>

    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("FileCatalog keeps tables only")

    create_table_transaction = register_table = drop_table = purge_table = _unsupported
    rename_table = create_namespace = drop_namespace = list_tables = _unsupported
    list_namespaces = list_views = load_view = _unsupported
    update_namespace_properties = drop_view = view_exists = namespace_exists = _unsupported
    register_view = create_view = _unsupported
