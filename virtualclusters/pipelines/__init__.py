"""Managed data pipelines: versioned configurations that the cluster's pipelines-role
agents run (docs/ARCHITECTURE.md "Managed data pipelines"). The engine is
``core.pipelines``; this package is the control plane's part: models, services, the
agent API's calls, the dry run through the browse channel."""
