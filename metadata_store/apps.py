from django.apps import AppConfig


class MetadataStoreConfig(AppConfig):
    """The metadata store: what data exists, where it lives, and its offsets."""

    name = "metadata_store"

    def ready(self) -> None:
        from metadata_store.agent_api import key_changes

        key_changes.connect()
