"""The agent API's own Prometheus metrics (commits/s, fetch-plan latency): defined here,
in the room that counts them, on the process's default registry, so the project's
`/metrics` (`controlplane.metrics`) exposes them without the store importing the project."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

AGENT_API_CALLS = Counter(
    "floe_agent_api_calls", "Agent-API calls answered, by call and outcome.", ["call", "outcome"]
)
AGENT_API_SECONDS = Histogram(
    "floe_agent_api_seconds",
    "Time to answer an agent-API call (commit: the metadata commit; fetch_plan: a plan).",
    ["call"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
