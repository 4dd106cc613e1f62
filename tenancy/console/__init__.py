"""What every app's console pages share: the signed-in person's organization and role
(``scope``: ``current_org``, ``org_or_404``, the ``RolePermissions`` middleware), the
template context (``context``), a service's errors on a form (``forms``), the diff of two
texts (``text_diff``) and secrets shown once after a redirect (``one_time_secret``)."""
