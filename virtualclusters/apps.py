from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from metadata_store.clusters import VirtualCluster


class VirtualClustersConfig(AppConfig):
    name = "virtualclusters"
    verbose_name = "Virtual clusters"

    def ready(self) -> None:
        """Count what agents report consuming (the metadata store, below, only sends it)."""
        from metadata_store.live_agents import agent_consumption_reported
        from virtualclusters.throughput.services import consumption_add

        def _consumed(
            sender: object,
            *,
            cluster: VirtualCluster,
            before: dict[str, list[int]],
            after: dict[str, list[int]],
            **_: object,
        ) -> None:

            consumption_add(cluster=cluster, before=before, after=after)

        agent_consumption_reported.connect(
            _consumed, weak=False, dispatch_uid="throughput-consumed"
        )

        # An agent's answer to a pipeline's dry run is checked by the pipelines' rule.
        from virtualclusters.browsing.agent_api import ANSWER_CHECKS
        from virtualclusters.pipelines.dry_run import KIND, dry_run_check

        ANSWER_CHECKS[KIND] = dry_run_check
