"""Billing tests reuse the real-agent fixtures (`agent`, `cluster`, `bucket_url`) and the
browser's (`page`, `screenshots`)."""

from tests.agents.conftest import agent, bucket_url, cluster  # noqa: F401
from tests.controlplane.browser.conftest import page, screenshots  # noqa: F401
