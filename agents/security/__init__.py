"""Who may talk to an agent, and what they may do: SASL (PLAIN, SCRAM-SHA-256/512), ACLs,
TLS on the Kafka listener. The primitives (SCRAM verifiers, the ACL rules) are in
``core.security``; this package is their use inside the agent process.

- `session`: one connection's security state (principal, SASL progress) and the
  agent-wide `Security` (credential and ACL caches, TLS context).
- `caches`: SASL credentials and the cluster's ACLs, fetched from the control plane.
- `sasl`: the SaslHandshake and SaslAuthenticate handlers.
- `authorization`: the one place requests are checked against ACLs before their handler.
- `tls`: the listener's SSL context and the principal of a client certificate.
"""
