"""Team & audit, a domain app: accounts (sign-up, sign-in), the team (invitations, role
changes, removals: ``members``), application API keys (``models.ApiKey``, ``services``)
and the REST API's authentication by them (``api.auth``), the audit log (``audit``,
``models.AuditEvent``), with their REST views (``api.views``) and console pages
(``console``)."""
