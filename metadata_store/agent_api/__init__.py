"""The agent API (``/agent/v1/``, docs/AGENT_API.md): ``endpoint`` authenticates and
validates every call against ``schemas``; ``views`` are the metadata store's calls."""
