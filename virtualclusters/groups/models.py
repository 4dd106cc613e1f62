"""Consumer groups as their coordinator agents report them."""

from __future__ import annotations

from django.db import models

from tenancy.models import OrgScopedQuerySet


class GroupReport(models.Model):
    """A consumer group as its coordinator agent last reported it: state, members and
    their assignments (groups.py). Live while `reported_at` is within the agent liveness
    window; committed offsets are `GroupOffset` rows, independent of this."""

    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=64)
    state = models.CharField(max_length=32)
    protocol_type = models.CharField(max_length=64, blank=True, default="")
    # "classic" or "consumer" (KIP-848: the coordinator assigns; members carry their
    # member epoch and target assignment, and `assignment_epoch` is the target's epoch).
    group_type = models.CharField(max_length=16, default="classic")
    assignment_epoch = models.IntegerField(default=0)
    protocol = models.CharField(max_length=255, blank=True, default="")
    generation = models.IntegerField(default=0)
    leader = models.CharField(max_length=255, blank=True, default="")
    members = models.JSONField(default=list, blank=True)
    reported_at = models.DateTimeField()

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_group_report"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "group_id"], name="group_report_unique")
        ]
