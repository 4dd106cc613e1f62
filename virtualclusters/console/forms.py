"""The cluster pages' forms: typed input only. Business rules live in the services, whose
``ValidationError`` (keyed by field) ``add_service_errors`` shows next to the fields."""

from __future__ import annotations

from typing import Any

from django import forms

from virtualclusters.models import VirtualCluster
from virtualclusters.services import CONFIG_BOUNDS

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
RETENTION_UNITS = {"days": DAY_MS, "hours": HOUR_MS, "ms": 1}


def _bounds(field: str) -> str:
    low, high = CONFIG_BOUNDS[field]
    return f"{low:,}–{high:,}"


class ClusterConfigForm(forms.Form):
    """A cluster's configuration. Retention is typed in days, hours or milliseconds."""

    auto_create_topics = forms.BooleanField(
        required=False,
        label="Auto-create topics",
        help_text="Create a topic the first time a client produces to or fetches it.",
    )
    default_partitions = forms.IntegerField(
        label="Default partitions",
        help_text=f"For topics created without a partition count ({_bounds('default_partitions')}).",
    )
    retention_value = forms.IntegerField(
        label="Default retention", help_text="How long messages are kept; -1 keeps them forever."
    )
    retention_unit = forms.ChoiceField(
        label="Retention unit", choices=[(unit, unit) for unit in RETENTION_UNITS]
    )
    acls_enabled = forms.BooleanField(
        required=False,
        label="ACLs enabled",
        help_text="Check Kafka ACLs on every request.",
    )
    max_flush_age_ms = forms.IntegerField(
        label="Max flush age (ms)",
        help_text="Agents write a file at least this often; lower means lower produce "
        f"latency and more files ({_bounds('max_flush_age_ms')}).",
    )
    max_flush_bytes = forms.IntegerField(
        label="Max flush size (bytes)",
        help_text=f"…or as soon as a file reaches this size ({_bounds('max_flush_bytes')}).",
    )
    consumer_session_timeout_ms = forms.IntegerField(
        required=False,
        label="Consumer group session timeout (ms)",
        help_text="group.protocol=consumer groups: a member silent this long loses its "
        f"partitions ({_bounds('consumer_session_timeout_ms')}).",
    )
    consumer_heartbeat_interval_ms = forms.IntegerField(
        required=False,
        label="Consumer group heartbeat interval (ms)",
        help_text="…and heartbeats this often, below the session timeout "
        f"({_bounds('consumer_heartbeat_interval_ms')}).",
    )
    ripcord = forms.BooleanField(
        required=False,
        label="Ripcord",
        help_text="Keep producing while the control plane is unreachable: agents journal "
        "records to the bucket, acknowledge them, and commit them when it is back.",
    )

    jobs_agent_groups = forms.CharField(
        required=False,
        label="Agent groups that run jobs",
        widget=forms.TextInput(attrs={"placeholder": "any group"}),
        help_text="Comma-separated agent groups whose jobs-role agents run compaction, "
        "retention, table appends and migrations; empty: any group.",
    )

    default_topic_type = forms.ChoiceField(
        required=False,
        label="Default topic type",
        choices=[("standard", "standard"), ("lightning", "lightning")],
        help_text="For topics that do not set floe.topic.type: lightning acknowledges a "
        "produce once its file is in the bucket and commits it asynchronously.",
    )

    # Service field → form field, for errors the service reports.
    SERVICE_FIELDS = {"default_retention_ms": "retention_value"}

    @staticmethod
    def initial_for(cluster: VirtualCluster) -> dict[str, Any]:
        """Form values showing ``cluster``'s configuration (retention in its largest unit)."""
        initial = cluster.config()
        initial["jobs_agent_groups"] = ", ".join(initial["jobs_agent_groups"])
        retention, unit = initial.pop("default_retention_ms"), "days"
        if retention > 0:
            unit = next(u for u, ms in RETENTION_UNITS.items() if retention % ms == 0)
            retention //= RETENTION_UNITS[unit]
        return {**initial, "retention_value": retention, "retention_unit": unit}

    def config(self) -> dict[str, Any]:
        """The configuration as the services take it (call after ``is_valid()``)."""
        data = self.cleaned_data
        value = data["retention_value"]
        config = {
            name: data[name]
            for name in VirtualCluster.CONFIG_FIELDS
            if name in data and data[name] not in (None, "")  # left empty: unchanged
        }
        if "jobs_agent_groups" in data:  # the text field: empty means any group
            text = data["jobs_agent_groups"] or ""
            config["jobs_agent_groups"] = [g.strip() for g in text.split(",") if g.strip()]
        config["default_retention_ms"] = (
            value * RETENTION_UNITS[data["retention_unit"]] if value > 0 else value
        )
        return config


class ClusterCreateForm(ClusterConfigForm):
    name = forms.CharField(max_length=100, widget=forms.TextInput(attrs={"autofocus": True}))
    bucket_url = forms.CharField(
        label="Bucket",
        max_length=1024,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "s3://my-bucket?region=eu-west-1"}),
        help_text="Your bucket's URL, never credentials. Leave empty: the first agent's "
        "--bucket-url fixes it.",
    )

    field_order = ["name", "bucket_url"]


class ClusterRenameForm(forms.Form):
    name = forms.CharField(label="Cluster name", max_length=100)


class ClusterDeleteForm(forms.Form):
    confirm_name = forms.CharField(
        label="Type the cluster's name to confirm",
        error_messages={"required": "Type the cluster's name to confirm deletion."},
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )


class AgentKeyCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. prod-agents"}),
    )
    agent_group = forms.CharField(
        max_length=63,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "agent group (any)"}),
    )
