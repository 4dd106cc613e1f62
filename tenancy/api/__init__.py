"""What every app's REST views share: pages (``pagination``), serializers that refuse
unknown fields and wrong JSON types (``strict``), the organization-scoped view (``views``)."""
