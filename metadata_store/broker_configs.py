"""Dynamic broker configs: Kafka's AlterConfigs / IncrementalAlterConfigs on a BROKER.

Floe's agents are interchangeable, so a broker config belongs to the virtual cluster: set
on broker "3" or on the cluster-wide default (""), it is kept once per cluster and every
agent describes it back. The configs agents make from the cluster's settings
(``core.kafka.broker_configs.FROM_CLUSTER_SETTINGS``: num.partitions, log.retention.ms …)
are refused here — they change with the cluster's settings in the console or REST. Any
other name is kept as given, as Kafka keeps custom broker configs, for the tools that set
them; Floe's agents act on none of them.
"""

from __future__ import annotations

from django.db import transaction

from core.kafka.broker_configs import FROM_CLUSTER_SETTINGS, MAX_DYNAMIC_BROKER_CONFIGS
from core.kafka.errors import ErrorCode
from metadata_store.clusters import VirtualCluster
from metadata_store.store import JSON
from metadata_store.topic_configs import ConfigOpError, config_ops_apply

MAX_VALUE_CHARS = 4096


def _problem(name: str, value: object) -> str | None:
    if name in FROM_CLUSTER_SETTINGS:
        return (
            f"Broker config {name} follows the virtual cluster's settings on Floe; "
            "change it there (console or REST API)"
        )
    if value is None:
        return f"Null value not supported for broker config {name}"
    if len(str(value)) > MAX_VALUE_CHARS:
        return f"Value of broker config {name} is longer than {MAX_VALUE_CHARS} characters"
    return None


def broker_configs_describe(cluster: VirtualCluster) -> JSON:
    # Read anew: the agent API's cluster object may be a cached one.
    configs = VirtualCluster.objects.filter(pk=cluster.pk).values_list("broker_configs", flat=True)
    return {"configs": dict(sorted((configs.first() or {}).items()))}


@transaction.atomic
def broker_configs_alter(
    cluster: VirtualCluster, ops: list[JSON], *, incremental: bool, validate_only: bool
) -> JSON:
    """Apply config ops to the cluster's dynamic broker configs; an error answers none."""
    cluster = VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
    try:
        configs = config_ops_apply(
            cluster.broker_configs,
            ops,
            incremental=incremental,
            problem=_problem,
            list_base=lambda name: "",
        )
    except ConfigOpError as exc:
        return {"error_code": int(exc.code), "error_message": exc.message}
    if len(configs) > MAX_DYNAMIC_BROKER_CONFIGS:
        return {
            "error_code": int(ErrorCode.POLICY_VIOLATION),
            "error_message": f"A cluster keeps at most {MAX_DYNAMIC_BROKER_CONFIGS} broker configs",
        }
    if not validate_only:
        cluster.broker_configs = configs
        cluster.save(update_fields=["broker_configs"])
    return {"error_code": 0, "error_message": None}
