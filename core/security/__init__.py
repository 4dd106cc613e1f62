"""Security primitives shared by the agent and the control plane.

- `scram`: password verifiers (computed once by the control plane, which stores only
  them) and the server side of SCRAM (RFC 5802 / RFC 7677) and PLAIN (RFC 4616).
- `acl`: Kafka's ACL vocabulary (resource, pattern, operation, permission) and the
  authorizer's rules (deny wins, implied DESCRIBE, literal/prefixed/wildcard).
"""
