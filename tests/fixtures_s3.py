"""A real S3 API for tests: moto's server on 127.0.0.1, spoken to over HTTP by boto3.

Use it from any test folder's conftest.py:

    from tests.fixtures_s3 import moto_s3_url  # noqa: F401  (registers the fixture)

`moto_s3_url` is session-scoped and yields "s3://<fresh bucket>?endpoint=...&region=us-east-1";
append "&prefix=<something unique>" to give each test its own corner of the bucket.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

REGION = "us-east-1"

_DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    # Never fall back to the machine's own credentials or the EC2 metadata service.
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}


@contextlib.contextmanager
def moto_s3_server() -> Iterator[str]:
    """Run moto's S3 server on a free 127.0.0.1 port with dummy credentials; yield its endpoint."""
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as patch:
        for name, value in _DUMMY_AWS_ENV.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            yield f"http://{host}:{port}"
        finally:
            server.stop()


def create_bucket(endpoint: str, name: str | None = None) -> str:
    """Create a bucket on the moto server at `endpoint`; return its name."""
    import boto3

    name = name or f"floe-test-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
    client.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def moto_s3_url() -> Iterator[str]:
    """An s3:// URL for a fresh bucket on a moto server reached over real HTTP."""
    with moto_s3_server() as endpoint:
        bucket = create_bucket(endpoint)
        yield f"s3://{bucket}?endpoint={endpoint}&region={REGION}"
