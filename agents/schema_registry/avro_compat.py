"""Avro compatibility: can a reader schema read what a writer schema wrote? The rules of
the Avro specification's "Schema Resolution", written here over fastavro's parsed
schemas (fastavro parses and checks a schema, but does not compare two). Tested on Confluent's documented examples
(tests/agents/test_schema_registry_compat.py).
"""

from __future__ import annotations

from typing import Any

from core.schemas.formats import ParsedSchema

# Avro's promotions: a writer's type → the reader types that read it.
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
_NAMED = ("record", "error", "enum", "fixed")


def _resolve(node: Any, named: dict[str, Any]) -> Any:
    """A schema node with named-type references replaced by their definitions, and a
    `{"type": "int"}` (with or without a logical type) read as "int"."""
    if isinstance(node, str):
        return named.get(node, node)
    if isinstance(node, dict) and isinstance(node.get("type"), str):
        kind = node["type"]
        if kind not in _NAMED and kind not in ("array", "map"):
            return _resolve(kind, named)
    return node


def _kind(node: Any) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        return "record" if node["type"] == "error" else str(node["type"])
    return str(node)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _same_name(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    # The spec compares unqualified names; aliases of the reader name the writer too.
    names = {_short(reader["name"]), *(_short(a) for a in reader.get("aliases") or [])}
    return _short(writer["name"]) in names


class _Checker:
    def __init__(self, reader: ParsedSchema, writer: ParsedSchema) -> None:
        self.named_r = reader.named
        self.named_w = writer.named
        self.problems: list[str] = []
        self._seen: set[tuple[str, str]] = set()

    def check(self, reader: Any, writer: Any, path: str) -> bool:
        reader = _resolve(reader, self.named_r)
        writer = _resolve(writer, self.named_w)
        rk, wk = _kind(reader), _kind(writer)
        if wk == "union":
            # Every branch the writer may have written must be readable.
            ok = True
            for index, branch in enumerate(writer):
                ok &= self._quiet(reader, branch, f"{path}/{index}")
            if not ok:
                self.problems.append(f"{path}: a branch of the writer's union cannot be read")
            return ok
        if rk == "union":
            if any(self._quiet(branch, writer, path) for branch in reader):
                return True
            self.problems.append(f"{path}: the reader's union has no branch for {wk}")
            return False
        if rk != wk:
            if rk in _PROMOTIONS.get(wk, ()):
                return True
            self.problems.append(f"{path}: reader type {rk} cannot read writer type {wk}")
            return False
        if rk == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if rk == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        if rk in ("record", "enum", "fixed"):
            if not _same_name(reader, writer):
                self.problems.append(
                    f"{path}: name {reader['name']} does not match the writer's {writer['name']}"
                )
                return False
        if rk == "fixed":
            if reader["size"] != writer["size"]:
                self.problems.append(f"{path}: fixed size {reader['size']} != {writer['size']}")
                return False
            return True
        if rk == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                self.problems.append(f"{path}: the reader's enum lacks symbols {missing}")
                return False
            return True
        if rk == "record":
            return self._record(reader, writer, path)
        return True

    def _quiet(self, reader: Any, writer: Any, path: str) -> bool:
        """`check` without recording problems (trying union branches)."""
        kept = list(self.problems)
        ok = self.check(reader, writer, path)
        self.problems = kept
        return ok

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        pair = (reader["name"], writer["name"])
        if pair in self._seen:  # a recursive type: assume what is being checked holds
            return True
        self._seen.add(pair)
        written = {f["name"]: f for f in writer["fields"]}
        for alias_field in writer["fields"]:
            for alias in alias_field.get("aliases") or []:
                written.setdefault(alias, alias_field)
        ok = True
        for field in reader["fields"]:
            names = [field["name"], *(field.get("aliases") or [])]
            match = next((written[n] for n in names if n in written), None)
            where = f"{path}/fields/{field['name']}"
            if match is None:
                if "default" not in field:
                    self.problems.append(
                        f"{where}: the reader's field has no default and the writer lacks it"
                    )
                    ok = False
            elif not self.check(field["type"], match["type"], where):
                ok = False
        self._seen.discard(pair)
        return ok


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why `reader` cannot read data written with `writer` (empty: it can)."""
    checker = _Checker(reader, writer)
    checker.check(reader.parsed, writer.parsed, "")
    return checker.problems
