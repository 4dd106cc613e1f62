"""The web console: server-rendered pages over the same services as the REST API.

The project's own pages are here (``accounts``, ``team``, ``audit``, ``api_keys``) with
what every app's pages share (``tenancy``: the signed-in person's organization and role;
``forms.add_service_errors``; ``one_time_secret``); each app keeps its own pages
(``virtualclusters.console``, ``billing.console``), included by ``console_urls``. Every
query goes through the signed-in user's organization, so another organization's cluster
or key is a 404.
"""
