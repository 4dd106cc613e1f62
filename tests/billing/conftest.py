"""Billing tests reuse the real-agent fixtures (`agent`, `cluster`, `bucket_url`)."""

from tests.agents.conftest import agent, bucket_url, cluster  # noqa: F401
