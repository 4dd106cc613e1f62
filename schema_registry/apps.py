from django.apps import AppConfig


class SchemaRegistryConfig(AppConfig):
    name = "schema_registry"
    label = "schema_registry"
    default_auto_field = "django.db.models.BigAutoField"
