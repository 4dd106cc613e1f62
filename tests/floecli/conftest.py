"""The floe command's tests: real agents through the fixtures of tests/agents."""

from tests.agents.conftest import agent, bucket_url, cluster  # noqa: F401
