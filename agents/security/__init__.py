"""Who may talk to an agent, and what they may do: SASL (PLAIN, SCRAM-SHA-256/512), ACLs,
TLS on the Kafka listener.

- `scram`: password verifiers (computed once by the control plane) and the server side of
  SCRAM (RFC 5802 / RFC 7677) and PLAIN (RFC 4616). Standard library only: the control
  plane imports it to compute what it stores.
- `acl`: Kafka's ACL vocabulary (resource, pattern, operation, permission) and the
  authorizer's rules (deny wins, implied DESCRIBE, literal/prefixed/wildcard). Pure.
- `session`: one connection's security state (principal, SASL progress) and the
  agent-wide `Security` (credential and ACL caches, TLS context).
- `sasl`: the SaslHandshake and SaslAuthenticate handlers.
- `authorization`: the one place requests are checked against ACLs before their handler.
- `acl_handlers`: CreateAcls, DescribeAcls and DeleteAcls.
- `tls`: the listener's SSL context and the principal of a client certificate.
"""
