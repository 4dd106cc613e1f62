"""The fault suite's world (one for the whole suite: starting it is the slow part) and
the table of figures printed at the end of the run."""

from __future__ import annotations

import logging

import pytest

from tests.faults.probe import Outcome
from tests.faults.world import World
from tests.fixtures_s3 import create_bucket, moto_s3_server

OUTCOMES: list[Outcome] = []


@pytest.fixture(scope="session")
def world():
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server: a line per call
    with moto_s3_server() as endpoint:
        built = World(endpoint, create_bucket(endpoint))
        try:
            yield built
        finally:
            built.close()


@pytest.fixture(scope="session")
def outcomes() -> list[Outcome]:
    return OUTCOMES


def pytest_terminal_summary(terminalreporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("fault suite: every acknowledged message read back once?")
    terminalreporter.write_line(Outcome.header())
    for outcome in OUTCOMES:
        terminalreporter.write_line(outcome.row())
