"""Fixtures for the core tests: no Django, no database."""

from tests.fixtures_s3 import moto_s3_url  # noqa: F401  (registers the session fixture)
