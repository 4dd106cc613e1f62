"""Broker config names shared by agents and the control plane.

Floe has no brokers to configure: its agents answer DescribeConfigs on a BROKER resource
with values made from the virtual cluster's settings (these names), plus the dynamic broker
configs the cluster keeps (AlterConfigs on a BROKER resource). The names below follow the
cluster's settings, so they cannot be altered as broker configs.
"""

FROM_CLUSTER_SETTINGS = frozenset(
    {
        "broker.id",
        "default.replication.factor",
        "min.insync.replicas",
        "num.partitions",
        "auto.create.topics.enable",
        "message.max.bytes",
        "log.retention.ms",
        "delete.topic.enable",
        # KIP-848 groups: the cluster's consumer_session_timeout_ms / _heartbeat_interval_ms.
        "group.consumer.session.timeout.ms",
        "group.consumer.heartbeat.interval.ms",
    }
)
# A bound on what one cluster keeps (the control plane trusts nothing an agent sends).
MAX_DYNAMIC_BROKER_CONFIGS = 500
