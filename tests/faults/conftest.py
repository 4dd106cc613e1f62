"""The fault suite's world (one for the whole suite: starting it is the slow part) and
each fault's figures, which the run prints as a table at its end (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.faults.probe import FAULT_ROW, Outcome
from tests.faults.world import world_with_moto


@pytest.fixture(scope="session")
def world():
    with world_with_moto() as built:
        yield built


class _Recorder:
    """`outcomes.append(outcome)`: the figures go with the test's report (from whichever
    worker process ran it) to the end-of-run table."""

    def __init__(self, node: pytest.Item) -> None:
        self.node = node

    def append(self, outcome: Outcome) -> None:
        self.node.user_properties.append((FAULT_ROW, outcome.row()))


@pytest.fixture
def outcomes(request) -> _Recorder:
    return _Recorder(request.node)
