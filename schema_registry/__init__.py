"""The Schema Registry's metadata (docs/ARCHITECTURE.md, "Schema Registry"): subjects,
versions, ids and compatibility per virtual cluster. Schema texts are never here: they
live in the cluster's bucket, and agents serve the Confluent REST API over this app's
agent-API calls."""
