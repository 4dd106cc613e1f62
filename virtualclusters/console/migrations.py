"""A cluster's migrations from another Kafka in the console (issues 30 and 38): the list,
a form that creates one, a page that watches one (refreshing itself), and the cutover of
chosen topics and the stop of the whole migration, each after a page that says what
happens. The pages call the same services as the REST API (``virtualclusters.mirror``),
which also write the audit log; who may act is ``tenancy.permissions``' rule for the
URL names below, as everywhere in the console.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_GET, require_http_methods

from tenancy import permissions
from tenancy.console.scope import current_membership
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.mirror import selectors, services
from virtualclusters.mirror.models import Migration
from virtualclusters.models import VirtualCluster

REFRESH_MS = 3000  # how often a running migration's page reloads its state
LISTED = 50


class MigrationForm(forms.Form):
    """A new migration. Each field is an argument of ``services.migration_create``; a
    field named ``<argument>__<key>`` is the key of a dict argument (``source_security``).
    Adding a setting is adding its field here and naming it in ``FIELDSETS``."""

    source_bootstrap = forms.CharField(
        label="Source bootstrap servers",
        max_length=1024,
        widget=forms.TextInput(
            attrs={"placeholder": "kafka-1.internal:9092,kafka-2.internal:9092"}
        ),
        help_text="host:port of one or more brokers of the Kafka to copy from. Your agents "
        "with the jobs role connect to it, never the control plane.",
    )
    source_security__protocol = forms.ChoiceField(
        label="Security protocol",
        choices=[(p, p) for p in services.SECURITY_PROTOCOLS],
        initial="PLAINTEXT",
    )
    source_security__sasl_mechanism = forms.ChoiceField(
        label="SASL mechanism",
        required=False,
        choices=[("", "—")] + [(m, m) for m in services.SASL_MECHANISMS],
        help_text="With a SASL protocol; PLAIN when left empty.",
    )
    source_security__username = forms.CharField(
        label="SASL username",
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    source_security__password = forms.CharField(
        label="SASL password",
        required=False,
        strip=False,
        max_length=1024,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Stored sealed; never shown again.",
    )
    source_security__ca = forms.CharField(
        label="CA certificates (PEM)",
        required=False,
        max_length=65536,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "-----BEGIN CERTIFICATE-----"}),
        help_text="With SSL, when the source's certificates are not signed by a public CA.",
    )
    topics = forms.CharField(
        label="Topics (regex)",
        max_length=1000,
        widget=forms.TextInput(attrs={"placeholder": "orders|payments-.*"}),
        help_text="A regular expression matched against whole topic names.",
    )
    groups = forms.CharField(
        label="Consumer groups (regex)",
        required=False,
        max_length=1000,
        help_text="Groups whose committed offsets are copied; none when left empty.",
    )
    start_from_now = forms.BooleanField(
        label="Start from now",
        required=False,
        help_text="Copy from each source partition's end rather than its log start.",
    )

    source_schema_registry__url = forms.CharField(
        label="Source Schema Registry URL",
        required=False,
        max_length=1024,
        help_text="Schema linking: its subjects are copied with their ids until cutover.",
        widget=forms.TextInput(attrs={"placeholder": "https://registry.example.com:8081"}),
    )
    source_schema_registry__username = forms.CharField(
        label="Registry username",
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    source_schema_registry__password = forms.CharField(
        label="Registry password",
        required=False,
        strip=False,
        max_length=1024,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    subjects = forms.CharField(
        label="Subjects (regex)",
        required=False,
        max_length=1000,
        help_text="Subjects linked; every one when left empty.",
    )

    FIELDSETS: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("Source", ("source_bootstrap",)),
        (
            "Source security",
            (
                "source_security__protocol",
                "source_security__sasl_mechanism",
                "source_security__username",
                "source_security__password",
                "source_security__ca",
            ),
        ),
        ("What to copy", ("topics", "groups", "start_from_now")),
        (
            "Schema linking (optional)",
            (
                "source_schema_registry__url",
                "source_schema_registry__username",
                "source_schema_registry__password",
                "subjects",
            ),
        ),
    )

    def fieldsets(self) -> list[tuple[str, list[forms.BoundField]]]:
        return [(legend, [self[name] for name in names]) for legend, names in self.FIELDSETS]

    def service_arguments(self) -> dict[str, Any]:
        """``migration_create``'s keyword arguments (after ``is_valid()``); a dict
        argument keeps only the keys given."""
        arguments: dict[str, Any] = {}
        for name, value in self.cleaned_data.items():
            argument, _, key = name.partition("__")
            if not key:
                arguments[argument] = value
            elif value not in ("", None):
                arguments.setdefault(argument, {})[key] = value
        return arguments

    def add_service_error(self, exc: services.MigrationInvalid) -> None:
        """The service's error next to its field: a dict argument's error goes to the key
        its message names (else its first key); an unknown field's above the form."""
        if exc.field in self.fields:
            self.add_error(exc.field, exc.message)
            return
        keys = [name for name in self.fields if name.startswith(exc.field + "__")]
        named = [name for name in keys if exc.message.startswith(name.partition("__")[2])]
        self.add_error(next(iter(named + keys), None), exc.message)


def _migration_or_404(cluster: VirtualCluster, migration_id: str) -> Migration:
    """A migration of this cluster (itself found through the person's organization)."""
    return get_object_or_404(Migration.objects.filter(cluster=cluster), public_id=migration_id)


def _may_act(request: HttpRequest) -> bool:
    """Whether the person's role may change the cluster (the buttons are shown)."""
    membership = current_membership(request)
    return membership is not None and permissions.allows(membership.role, "migration-stop", "POST")


@login_required
@require_GET
def migration_list(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    context = {
        "cluster": cluster,
        "migrations": selectors.migrations_shown(cluster, limit=LISTED),
        "may_act": _may_act(request),
    }
    return render(request, "virtualclusters/migrations.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def migration_new(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    form = MigrationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            migration = services.migration_create(cluster=cluster, **form.service_arguments())
        except services.MigrationInvalid as exc:
            form.add_service_error(exc)
        else:
            messages.success(
                request,
                f"Migration {migration.public_id} created: an agent with the jobs role "
                "starts copying within seconds.",
            )
            return redirect(
                "migration-detail", cluster_id=cluster.public_id, migration_id=migration.public_id
            )
    status = 400 if form.is_bound else 200
    context = {"cluster": cluster, "form": form, "may_act": _may_act(request)}
    return render(request, "virtualclusters/migration_new.html", context, status=status)


@login_required
@require_GET
def migration_detail(request: HttpRequest, cluster_id: str, migration_id: str) -> HttpResponse:
    """A migration's state; the page reloads it every few seconds while it runs."""
    cluster = cluster_or_404(request, cluster_id)
    migration = _migration_or_404(cluster, migration_id)
    context = {
        "cluster": cluster,
        "migration": selectors.migration_shown(migration),
        "may_act": _may_act(request),
        "refresh_ms": REFRESH_MS,
    }
    return render(request, "virtualclusters/migration.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def migration_cutover(request: HttpRequest, cluster_id: str, migration_id: str) -> HttpResponse:
    """GET: what cutting over the chosen topics does, and a button; POST: do it."""
    cluster = cluster_or_404(request, cluster_id)
    migration = _migration_or_404(cluster, migration_id)
    back = redirect("migration-detail", cluster_id=cluster.public_id, migration_id=migration_id)
    chosen = (request.POST if request.method == "POST" else request.GET).getlist("topics")
    if not chosen:
        messages.error(request, "Choose the topics to cut over.")
        return back
    if request.method == "POST":
        try:
            done = services.migration_cutover(
                migration=migration, topics=chosen, schemas=request.POST.get("schemas") == "on"
            )
        except services.MigrationInvalid as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, f"Cut over: {', '.join(done)}. Producers may write to them now."
            )
        return back
    shown = selectors.migration_shown(migration)
    topics = [t for t in shown["topics"] if t["name"] in chosen and t["state"] == "mirroring"]
    if len(topics) != len(set(chosen)):
        messages.error(request, "Only topics this migration still mirrors can be cut over.")
        return back
    context = {
        "cluster": cluster,
        "migration": shown,
        "topics": topics,
        "may_act": _may_act(request),
    }
    return render(
        request, "virtualclusters/migration_confirm.html", {**context, "action": "cutover"}
    )


@login_required
@require_http_methods(["GET", "POST"])
def migration_stop(request: HttpRequest, cluster_id: str, migration_id: str) -> HttpResponse:
    """GET: what stopping does, and a button; POST: stop the migration."""
    cluster = cluster_or_404(request, cluster_id)
    migration = _migration_or_404(cluster, migration_id)
    if migration.state == Migration.State.STOPPED:
        messages.info(request, f"Migration {migration.public_id} is stopped already.")
        return redirect("migration-detail", cluster_id=cluster.public_id, migration_id=migration_id)
    if request.method == "POST":
        services.migration_stop(migration=migration)
        messages.success(request, f"Migration {migration.public_id} stopped.")
        return redirect("migration-detail", cluster_id=cluster.public_id, migration_id=migration_id)
    shown = selectors.migration_shown(migration)
    topics = [t for t in shown["topics"] if t["state"] == "mirroring"]
    context = {
        "cluster": cluster,
        "migration": shown,
        "topics": topics,
        "may_act": _may_act(request),
    }
    return render(request, "virtualclusters/migration_confirm.html", {**context, "action": "stop"})


urlpatterns = [
    path("clusters/<str:cluster_id>/migrations/", migration_list, name="cluster-migrations"),
    path("clusters/<str:cluster_id>/migrations/new", migration_new, name="migration-new"),
    path(
        "clusters/<str:cluster_id>/migrations/<str:migration_id>/",
        migration_detail,
        name="migration-detail",
    ),
    path(
        "clusters/<str:cluster_id>/migrations/<str:migration_id>/cutover",
        migration_cutover,
        name="migration-cutover",
    ),
    path(
        "clusters/<str:cluster_id>/migrations/<str:migration_id>/stop",
        migration_stop,
        name="migration-stop",
    ),
]
