"""The registry's tests drive real agents (tests/agents) of clusters with SASL users
(tests/agents/security)."""

from tests.agents.security.conftest import other_cluster, secure_cluster  # noqa: F401
