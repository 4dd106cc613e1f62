"""The web console: server-rendered pages over the same services as the REST API.

Views are split by area (``accounts``, ``clusters``, ``agent_keys``, ``api_keys``); every
query goes through the signed-in user's organization (``tenancy``), so another
organization's cluster or key is a 404.
"""
