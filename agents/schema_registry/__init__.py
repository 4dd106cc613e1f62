"""The agent's Schema Registry (role `schema-registry`): Confluent's REST API on
`--schema-registry-port`, schema texts in the cluster's bucket, ids and versions from
the control plane (docs/ARCHITECTURE.md, "Schema Registry")."""
