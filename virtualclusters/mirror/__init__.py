"""Offset-preserving migration from any Kafka (issue 30): the Migration model, its
services, its agent-API calls (the jobs-role agents' copier) and nothing of the data."""
