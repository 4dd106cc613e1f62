"""Topic tables' fixtures: moto's S3 server for a cluster whose bucket is on S3."""

from tests.fixtures_s3 import moto_s3_url  # noqa: F401 - registers the fixture
