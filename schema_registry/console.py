"""The console's Schemas page of a cluster: its subjects, a subject's versions with the
schema text (read by a live agent over the browse channel, `schema_registry.browser`),
a diff between two versions, compatibility levels, references, and deletes with typed
confirmation."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from schema_registry import selectors, services
from schema_registry.browser import schema_texts
from schema_registry.models import COMPATIBILITY_LEVELS
from schema_registry.services import RegistryError
from tenancy.console.text_diff import diff_lines
from virtualclusters.browsing.asking import BrowseNotFound, BrowseUnavailable
from virtualclusters.console.lookup import cluster_or_404


def readable(document: dict[str, Any]) -> str:
    """A schema's text as people read it: JSON (Avro, JSON Schema) indented, anything else
    (Protobuf) as stored."""
    text = document["schema"]
    if document.get("schemaType", "AVRO") in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return str(text)


def _number(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


@login_required
@require_GET
def cluster_schemas(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """The cluster's subjects (soft-deleted ones with ``?deleted=1``) and its global level."""
    cluster = cluster_or_404(request, cluster_id)
    deleted = request.GET.get("deleted") == "1"
    context = {
        "cluster": cluster,
        "subjects": selectors.subjects_overview(cluster=cluster, deleted=deleted),
        "deleted": deleted,
        "global_level": selectors.global_compatibility(cluster),
        "levels": COMPATIBILITY_LEVELS,
    }
    return render(request, "schema_registry/subjects.html", context)


@login_required
@require_GET
def schema_subject(request: HttpRequest, cluster_id: str, subject: str) -> HttpResponse:
    """A subject: its versions, one version's text (``?version=``, default the latest),
    and its diff from another (``?compare=``)."""
    cluster = cluster_or_404(request, cluster_id)
    try:
        detail = selectors.subject_detail(cluster=cluster, subject=subject)
    except RegistryError:
        raise Http404("No such subject.") from None
    versions = {v["version"]: v for v in detail["versions"]}
    for before, after in zip(detail["versions"], detail["versions"][1:], strict=False):
        after["previous"] = before["version"]
    live = [n for n, v in versions.items() if not v["deleted"]]
    wanted = _number(request.GET.get("version"))
    shown = wanted if wanted is not None and wanted in versions else (live or list(versions))[-1]
    compare = _number(request.GET.get("compare"))
    compare = compare if compare in versions and compare != shown else None
    version = versions[shown]
    asked = [version["fingerprint"]] + ([versions[compare]["fingerprint"]] if compare else [])
    text, diff, problem, agent, status = None, None, None, None, 200
    try:
        texts = schema_texts(cluster, asked)
    except BrowseNotFound as exc:
        problem = str(exc)
    except BrowseUnavailable as exc:
        problem = str(exc)
        status = exc.status if exc.status in (502, 504) else 200
    else:
        agent = texts.get("agent")
        text = readable(texts["texts"][version["fingerprint"]])
        if compare is not None:
            old = readable(texts["texts"][versions[compare]["fingerprint"]])
            diff = diff_lines(old, text, old_name=f"version {compare}", new_name=f"version {shown}")
    context = {
        "cluster": cluster,
        "subject": detail,
        "version": version,
        "compare": compare,
        "text": text,
        "diff": diff,
        "problem": problem,
        "agent": agent,
        "referenced_by": selectors.referenced_by(cluster=cluster, subject=subject, version=shown),
        "levels": COMPATIBILITY_LEVELS,
    }
    return render(request, "schema_registry/subject.html", context, status=status)


def _subject_page(cluster_id: str, subject: str, anchor: str = "") -> str:
    return reverse("schema-subject", args=[cluster_id, subject]) + anchor


def _deleted(
    request: HttpRequest, cluster: Any, subject: str, delete: Any, done: str
) -> HttpResponse:
    """Run `delete(permanent)` once the person typed the subject's name; say `done`
    (with how) or why not. Where to go next: the subject's page, or the list when the
    subject has no version left."""
    here = _subject_page(cluster.public_id, subject, "#delete")
    if request.POST.get("confirm_name", "").strip() != subject:
        messages.error(request, "Type the subject's name to confirm deletion.")
        return redirect(here)
    permanent = request.POST.get("permanent") == "on"
    try:
        delete(permanent)
    except RegistryError as exc:
        messages.error(request, str(exc))
        return redirect(here)
    how = "permanently deleted" if permanent else "deleted (soft: its schema ids still resolve)"
    messages.success(request, f"{done} {how}.")
    left = selectors.subject_versions(
        cluster=cluster, subject=subject, deleted=True, missing_ok=True
    )["versions"]
    if not left:
        return redirect("cluster-schemas", cluster_id=cluster.public_id)
    return redirect(_subject_page(cluster.public_id, subject))


@login_required
@require_POST
def schema_subject_delete(request: HttpRequest, cluster_id: str, subject: str) -> HttpResponse:
    """Delete a subject: soft, or (``permanent``, after a soft delete) for good."""
    cluster = cluster_or_404(request, cluster_id)
    return _deleted(
        request,
        cluster,
        subject,
        lambda permanent: services.subject_delete(
            cluster=cluster, subject=subject, permanent=permanent
        ),
        f"Subject {subject}",
    )


@login_required
@require_POST
def schema_version_delete(request: HttpRequest, cluster_id: str, subject: str) -> HttpResponse:
    """Delete one version of a subject: soft, or (``permanent``) one soft-deleted already."""
    cluster = cluster_or_404(request, cluster_id)
    version = _number(request.POST.get("version"))
    if version is None:
        messages.error(request, "Choose the version to delete.")
        return redirect(_subject_page(cluster.public_id, subject, "#delete"))
    return _deleted(
        request,
        cluster,
        subject,
        lambda permanent: services.version_delete(
            cluster=cluster, subject=subject, version=version, permanent=permanent
        ),
        f"Version {version} of {subject}",
    )


@login_required
@require_POST
def schema_subject_config(request: HttpRequest, cluster_id: str, subject: str) -> HttpResponse:
    """Set a subject's compatibility level, or (empty) let it follow the global one."""
    cluster = cluster_or_404(request, cluster_id)
    level = request.POST.get("compatibility", "").strip()
    try:
        if level:
            services.config_set(cluster=cluster, subject=subject, compatibility=level)
        else:
            services.config_delete(cluster=cluster, subject=subject)
    except RegistryError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"{subject} now checks {level.upper()} compatibility."
            if level
            else f"{subject} follows the cluster's level again.",
        )
    return redirect(_subject_page(cluster.public_id, subject, "#compatibility"))


@login_required
@require_POST
def cluster_schemas_config(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """Set the cluster's compatibility level (subjects without their own follow it)."""
    cluster = cluster_or_404(request, cluster_id)
    try:
        level = services.config_set(
            cluster=cluster, subject=None, compatibility=request.POST.get("compatibility", "")
        )
    except RegistryError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Subjects without their own level now check {level}.")
    return redirect("cluster-schemas", cluster_id=cluster.public_id)
