"""The replicated metadata PostgreSQL (tests/ha/cluster.py) as a fixture: one per test
module (starting it, with its first base backup, is the slow part), backing up to a
bucket of its own on a moto server."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.ha.cluster import HACluster, ha_cluster


@pytest.fixture(scope="module")
def ha() -> Iterator[HACluster]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server: a line per call
    with ha_cluster() as cluster:
        yield cluster
