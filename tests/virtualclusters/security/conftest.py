"""Schemathesis's pytest items (one per API operation) all share the test function's node
id under pytest 9 — their names carry the operation, their ids do not. pytest-xdist hands
tests out by id, so 50 operations would run as one: give each item its name as its id."""

from __future__ import annotations


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if not getattr(item, "operation_label", None) or item.nodeid.endswith("]"):
            continue
        nodeid = f"{item.parent.nodeid}::{item.name}"
        if hasattr(item, "_id"):  # pytest 9: a structured id
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(nodeid)
        else:
            item._nodeid = nodeid
