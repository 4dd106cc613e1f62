"""The team's console pages: sign-up and sign-in (``accounts``), the team and
invitations (``team``), the audit log (``audit``), API keys (``api_keys``); ``urls``
lists them for the project's ``console_urls``."""
