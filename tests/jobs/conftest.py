"""Fixtures for the jobs: one Spark session for the whole run, a file:// bucket the
Spark executors (separate processes) share, and segment files committed through the
real metadata store."""

from __future__ import annotations

import pytest

from jobs.session import spark_session
from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures reused here
from tests.factories import make_cluster
from tests.jobs import driver
from tests.jobs.segments import SegmentWriter


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A test database of our own: other suites on this machine use test_<NAME>."""
    from django.conf import settings

    test = settings.DATABASES["default"].setdefault("TEST", {})
    if not test.get("NAME"):
        test["NAME"] = f"test_{settings.DATABASES['default']['NAME']}_jobs"


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the run (the jobs' own cached session)."""
    return spark_session("local[1]", shuffle_partitions=2)


@pytest.fixture
def jobs_settings(settings, bucket_url, monkeypatch):  # noqa: F811
    """Job settings with small thresholds; the in-process driver on the test's bucket."""
    monkeypatch.setattr(driver, "BUCKET_URL", bucket_url)
    monkeypatch.setattr(driver, "SPARK_MASTER", "local[1]")
    monkeypatch.setattr(driver, "SPARK_MODE", "inprocess")
    settings.FLOE_COMPACTION_MIN_FILES = 8
    settings.FLOE_COMPACTION_TARGET_BYTES = 1024 * 1024
    settings.FLOE_FILE_DELETE_GRACE_S = 300
    return settings


@pytest.fixture
def tenant(db):
    """A cluster of its own (plus the agent key that goes with it)."""
    cluster, key = make_cluster("jobs")
    return cluster


@pytest.fixture
def writer(spark, jobs_settings, tenant):
    """Writes segment files into the bucket and commits them for `tenant`."""
    return SegmentWriter(tenant, driver.BUCKET_URL)
