"""SASL users and ACLs of a virtual cluster: models, services, and the agent-API calls
agents use to check logins and load ACLs."""
