"""Billing: metered usage, plans, subscriptions, invoices and budgets.

Money is integer micro-units of the plan's currency (1 USD = 1,000,000); quantities are
exact (bytes, byte-seconds, 15-minute intervals). Usage is derived from what the metadata
store already holds (committed files, live files, live agents) by Celery beat tasks that
run beside the commit path, never inside it (`billing.meters`).
"""

from __future__ import annotations

from django.db import models

from tenancy.ids import public_id
from tenancy.models import Organization, OrgScopedQuerySet


def _plan_id() -> str:
    return public_id("pln")


def _invoice_id() -> str:
    return public_id("inv")


class UsageHour(models.Model):
    """One cluster's usage in one UTC hour (``hour`` is the hour's start).

    The organization is copied in (and the cluster may go away) so that a month's bill
    survives a deleted cluster.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", null=True, on_delete=models.SET_NULL
    )
    cluster_public_id = models.CharField(max_length=32)
    hour = models.DateTimeField()
    # Record-batch bytes committed (what producers sent: compressed when they compress).
    bytes_written = models.BigIntegerField(default=0)
    files_written = models.BigIntegerField(default=0)  # one object PUT each
    # The same batches with their records decompressed, as agents report them.
    bytes_written_uncompressed = models.BigIntegerField(default=0)
    # Live file bytes × seconds (time-weighted storage) and partitions × seconds.
    stored_byte_seconds = models.BigIntegerField(default=0)
    partition_seconds = models.BigIntegerField(default=0)
    # Object GETs and bytes served to consumers, as agents report them (applied once).
    object_gets = models.BigIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster_public_id", "hour"], name="usage_hour_unique")
        ]
        indexes = [models.Index(fields=["organization", "hour"], name="usage_org_hour_idx")]


class UsageTopicHour(models.Model):
    """One topic's share of a cluster's hour: bytes written (from the committed runs of
    its partitions) and live bytes × seconds (sampled less often than the cluster's)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    cluster_public_id = models.CharField(max_length=32)
    topic = models.CharField(max_length=249)
    hour = models.DateTimeField()
    bytes_written = models.BigIntegerField(default=0)
    stored_byte_seconds = models.BigIntegerField(default=0)

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_public_id", "topic", "hour"], name="usage_topic_hour_unique"
            )
        ]
        indexes = [models.Index(fields=["organization", "hour"], name="usage_topic_org_hour_idx")]


class ActiveInterval(models.Model):
    """A 15-minute interval (UTC, ``start`` aligned) in which a cluster had a live agent."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    cluster_public_id = models.CharField(max_length=32)
    start = models.DateTimeField()

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_public_id", "start"], name="active_interval_unique"
            )
        ]
        indexes = [models.Index(fields=["organization", "start"], name="active_org_start_idx")]


class MeterMark(models.Model):
    """How far a meter has run: the time of its last run and, for the files meter, the
    highest file id already counted (a run covers what came after)."""

    name = models.CharField(max_length=32, unique=True)
    mark = models.DateTimeField(null=True)
    position = models.BigIntegerField(default=0)


class AgentCounterMark(models.Model):
    """The cumulative read counters of one agent already metered (agents report counters
    since their start on every heartbeat; the meter adds only what grew since)."""

    cluster_public_id = models.CharField(max_length=32)
    agent_id = models.CharField(max_length=64)
    get_requests = models.BigIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)
    written_uncompressed = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_public_id", "agent_id"], name="agent_counter_mark_unique"
            )
        ]


class Plan(models.Model):
    """A price list, as data. ``prices`` maps a dimension (see `billing.rating.DIMENSIONS`)
    to ``{"included": units per month, "unit_price_micros": price per unit}`` (a plan may
    price compressed or uncompressed GiB written, or both); ``caps`` holds
    ``written_bytes``, the most a month may write (produce is refused at it)."""

    public_id = models.CharField(max_length=32, unique=True, default=_plan_id, editable=False)
    code = models.SlugField(max_length=32, unique=True)
    name = models.CharField(max_length=100)
    currency = models.CharField(max_length=3, default="USD")
    monthly_minimum_micros = models.BigIntegerField(default=0)
    prices = models.JSONField(default=dict)
    caps = models.JSONField(default=dict, blank=True)
    public = models.BooleanField(default=True)

    def __str__(self) -> str:
        return self.name


class Subscription(models.Model):
    """An organization is on ``plan`` from ``starts_at`` until ``ends_at`` (open: now)."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="subscriptions"
    )
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization"],
                condition=models.Q(ends_at__isnull=True),
                name="one_open_subscription",
            )
        ]


class Budget(models.Model):
    """An owner's monthly budget: the console alerts at 80 % and 100 % of it."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, related_name="budget"
    )
    monthly_micros = models.BigIntegerField()

    objects = OrgScopedQuerySet.as_manager()


class Invoice(models.Model):
    """A month's invoice (or a credit note correcting one). Immutable once issued.

    Payment is a separate concern: a provider records its reference and state in
    ``payment_reference``/``payment_state`` without touching amounts or lines.
    """

    class Kind(models.TextChoices):
        INVOICE = "invoice"
        CREDIT_NOTE = "credit_note"

    class PaymentState(models.TextChoices):
        OPEN = "open"
        PAID = "paid"
        VOID = "void"

    public_id = models.CharField(max_length=32, unique=True, default=_invoice_id, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="invoices"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.INVOICE)
    number = models.PositiveIntegerField()  # 1, 2, 3… per organization, no gaps
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    currency = models.CharField(max_length=3)
    total_micros = models.BigIntegerField()
    corrects = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT)
    issued_at = models.DateTimeField()
    payment_state = models.CharField(
        max_length=16, choices=PaymentState.choices, default=PaymentState.OPEN
    )
    payment_reference = models.CharField(max_length=128, blank=True, default="")

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "number"], name="invoice_number"),
            models.UniqueConstraint(
                fields=["organization", "period_start"],
                condition=models.Q(kind="invoice"),
                name="one_invoice_per_month",
            ),
        ]

    @property
    def display_number(self) -> str:
        return f"{'CN' if self.kind == self.Kind.CREDIT_NOTE else 'INV'}-{self.number:05d}"


class InvoiceLine(models.Model):
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="lines")
    position = models.PositiveSmallIntegerField()
    description = models.CharField(max_length=200)
    dimension = models.CharField(max_length=32, blank=True, default="")
    quantity = models.DecimalField(max_digits=30, decimal_places=9)
    unit_price_micros = models.BigIntegerField()
    amount_micros = models.BigIntegerField()

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "invoice__organization"

    class Meta:
        ordering = ["position"]
