"""The Floe agent: a stateless Kafka-protocol server that writes to object storage.

Run it with `floe-agent` / `python -m agents`; see `agents/config.py` for the flags.
Imports nothing from Django: it talks to the control plane only over the metadata API.
"""

# Reported in every heartbeat (the console's agent list); the project's version.
AGENT_VERSION = "0.1.0"
