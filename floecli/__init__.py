"""The ``floe`` command: operators' tools that talk to a cluster as any client does —
Kafka through confluent-kafka (librdkafka), segment files through `core`'s reader. No
Django, no app of the control plane (an import-linter contract says so)."""
