from typing import Any

from django.apps import AppConfig


class SchemaRegistryConfig(AppConfig):
    name = "schema_registry"
    label = "schema_registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Answers to the console's schema-text requests are checked by this app's rule.
        from schema_registry.browser import KIND, texts_check
        from virtualclusters.browsing.agent_api import ANSWER_CHECKS

        ANSWER_CHECKS[KIND] = texts_check

        # The message browser decodes keys and values framed with this registry's ids.
        from schema_registry.record_decoding import records_decode
        from virtualclusters.record_browser import RECORD_DECODERS

        RECORD_DECODERS[:] = [records_decode]

        # Topic tables read an Avro subject's versions through this (no app imports this one).
        from schema_registry.selectors import subject_versions
        from virtualclusters.tables.topic_tables import SUBJECT_VERSIONS

        def _versions(cluster: Any, subject: str) -> list[dict[str, Any]]:
            return list(
                subject_versions(cluster=cluster, subject=subject, deleted=False, missing_ok=True)[
                    "versions"
                ]
            )

        SUBJECT_VERSIONS[:] = [_versions]

        # A migration's schema link ends: the subjects it linked leave IMPORT mode.
        # A migration's schema link links a subject (IMPORT mode), or ends: the subjects it
        # linked leave IMPORT mode.
        from schema_registry.services import link_release, mode_set
        from virtualclusters.mirror.services import SCHEMA_LINK_IMPORT, SCHEMA_LINK_RELEASE

        def _import(cluster: Any, subject: str) -> None:
            mode_set(cluster=cluster, subject=subject, mode="IMPORT", force=True)

        def _release(cluster: Any, subjects: list[str], subjects_regex: str) -> None:
            link_release(cluster=cluster, subjects=subjects, subjects_regex=subjects_regex)

        SCHEMA_LINK_IMPORT[:] = [_import]
        SCHEMA_LINK_RELEASE[:] = [_release]
