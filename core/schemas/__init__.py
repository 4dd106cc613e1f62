"""Schema texts of the Schema Registry's three types — Avro, JSON Schema, Protobuf —
parsed, made canonical and fingerprinted (`formats`; `.proto` text through protoc in a
child process, `protoc`): what the agent's registry and the benchmarks that register
schemas as it does share."""
