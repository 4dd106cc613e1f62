"""DuckDB with its Iceberg extension, loaded from the installed package's files (no
download at run time), attached to a cluster's catalog."""

from __future__ import annotations

from pathlib import Path

import duckdb
import duckdb_ext  # type: ignore[import-not-found]  # the extension packages' files

EXTENSIONS = Path(duckdb_ext.__path__[0]) / "extensions" / f"v{duckdb.__version__}"


def _extension(name: str) -> str:
    found = sorted(EXTENSIONS.glob(f"*/{name}.duckdb_extension"))
    assert found, f"no {name} extension for DuckDB {duckdb.__version__} under {EXTENSIONS}"
    return str(found[0])


def duckdb_rows(catalog_url: str, token: str, namespace: str, table: str, query: str) -> list:
    """The rows of `query` (``{table}`` names the attached table)."""
    connection = duckdb.connect(
        config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    try:
        for name in ("avro", "httpfs", "iceberg"):
            connection.execute(f"LOAD '{_extension(name)}'")
        connection.execute("CREATE SECRET floe (TYPE iceberg, TOKEN ?)", [token])
        connection.execute(
            f"ATTACH 'floe' AS floe (TYPE iceberg, ENDPOINT '{catalog_url}', SECRET floe)"
        )
        return connection.execute(query.format(table=f'floe."{namespace}"."{table}"')).fetchall()
    finally:
        connection.close()
