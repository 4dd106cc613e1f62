"""Virtual clusters and their agent keys (the models are the metadata store's:
``metadata_store.clusters``, re-exported here), and this app's own models.

The metadata store's tables (topics, partitions, files, the batch index…) are the
``metadata_store`` app's; SASL users and ACLs, group reports, job runs, migrations and pipelines are
models of this app that live in its ``security``, ``groups``, ``jobs``, ``mirror`` and ``pipelines``
packages.
"""

from __future__ import annotations

# The cluster and its agent keys are the metadata store's (its rows hang from them); this
# app writes them (services, console, REST) and names them from here as before.
from metadata_store.clusters import (  # noqa: E402,F401
    DEFAULT_RETENTION_MS,
    AgentKey,
    AgentKeyQuerySet,
    VirtualCluster,
)

# Models of this app that live beside their services (Django finds models through this
# module). They name VirtualCluster by string, so none of them imports this module.
from virtualclusters.groups.models import GroupReport  # noqa: E402,F401
from virtualclusters.jobs.models import JobRun  # noqa: E402,F401
from virtualclusters.mirror.models import Migration, MigrationTopic  # noqa: E402,F401
from virtualclusters.pipelines.models import (  # noqa: E402,F401
    Pipeline,
    PipelineReport,
    PipelineVersion,
)
from virtualclusters.security.models import Acl, SaslCredential  # noqa: E402,F401
from virtualclusters.tables.models import (  # noqa: E402,F401
    IcebergNamespace,
    IcebergTable,
    TopicTable,
)
from virtualclusters.throughput.models import (  # noqa: E402,F401
    GroupLagSample,
    ThroughputSample,
    TopicConsumed,
)

__all__ = [
    "DEFAULT_RETENTION_MS",
    "Acl",
    "AgentKey",
    "AgentKeyQuerySet",
    "GroupLagSample",
    "GroupReport",
    "IcebergNamespace",
    "IcebergTable",
    "JobRun",
    "Migration",
    "MigrationTopic",
    "Pipeline",
    "PipelineReport",
    "PipelineVersion",
    "SaslCredential",
    "ThroughputSample",
    "TopicConsumed",
    "TopicTable",
    "VirtualCluster",
]
