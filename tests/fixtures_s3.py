"""A real S3 API for tests: moto's server on 127.0.0.1, spoken to over HTTP by boto3.

Use it from any test folder's conftest.py:

    from tests.fixtures_s3 import moto_s3_url  # noqa: F401  (registers the fixture)

`moto_s3_url` is session-scoped and yields "s3://<fresh bucket>?endpoint=...&region=us-east-1";
append "&prefix=<something unique>" to give each test its own corner of the bucket.

`moto_s3_process` runs the same server as a process of its own instead (the fault suite's
worlds): in the test's process, a server competes for the GIL with everything else the test
runs there, and its answers wait for it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.serving import free_port, wait_until_answering

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


@dataclass
class MotoProcess:
    """moto's server in a process of its own: its endpoint, the process, and its log (a
    line per request, with the second it was answered)."""

    endpoint: str
    proc: subprocess.Popen
    log: Path


@contextlib.contextmanager
def moto_s3_process(log: Path, ready_timeout_s: float = 30) -> Iterator[MotoProcess]:
    """`python -m moto.server` on a free 127.0.0.1 port with dummy credentials, its output
    in `log`; yield it once it answers, kill it on the way out."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "AWS_PROFILE"}
    env.update(_DUMMY_AWS_ENV)
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(
            endpoint + "/moto-api/", proc, ready_timeout_s, "moto's server", log=log
        )
        with pytest.MonkeyPatch.context() as patch:  # boto3 in this process: the same dummies
            for name, value in _DUMMY_AWS_ENV.items():
                patch.setenv(name, value)
            patch.delenv("AWS_PROFILE", raising=False)
            yield MotoProcess(endpoint, proc, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


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
