"""A cluster's managed data pipelines in the console: the list (state, version,
throughput, errors), a page per pipeline (per-agent status, throughput from successive
reports, lag, last errors; its versions and the diff of two; start, pause, delete after
a page that says what happens) and the editor (a configuration with line numbers:
Validate marks each problem at its line, Dry run shows per sample record its outputs,
filtered or error, Save makes a version). The pages call the same services as the REST
API (``virtualclusters.pipelines``), which also write the audit log; who may act is
``tenancy.permissions``' rule for the URL names below, as everywhere in the console.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from tenancy import permissions
from tenancy.console.scope import current_membership
from tenancy.console.text_diff import diff_lines
from virtualclusters.browsing.asking import BrowseNotFound, BrowseUnavailable
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.models import VirtualCluster
from virtualclusters.pipelines import dry_run, selectors, services
from virtualclusters.pipelines.config import MAX_CONFIG_CHARS, ConfigInvalid, Problem, config_check
from virtualclusters.pipelines.models import Pipeline

REFRESH_MS = 3000  # how often a pipeline's page reloads its live status
DRY_RUN_SAMPLES = 10

STARTER = """\
input:
  kafka:
    topics: [orders]
processors:
  - parse_json: {}
  - filter: 'value.amount > 0'
outputs:
  default: {kafka: {topic: orders-clean}}
errors:
  dead_letter: {topic: orders-dlq}
"""


def _pipeline_or_404(cluster: VirtualCluster, name: str) -> Pipeline:
    return get_object_or_404(Pipeline.objects.filter(cluster=cluster), name=name)


def _may_act(request: HttpRequest) -> bool:
    """Whether the person's role may change the cluster (the buttons are shown)."""
    membership = current_membership(request)
    return membership is not None and permissions.allows(membership.role, "pipeline-state", "POST")


def _numbered(config: str, problems: list[Problem]) -> list[dict[str, Any]]:
    """The editor's gutter: each line's number and the problems at it."""
    at: dict[int, list[str]] = {}
    for problem in problems:
        at.setdefault(problem.line, []).append(f"column {problem.column}: {problem.message}")
    count = max(config.count("\n") + 1, max(at, default=1))
    return [{"number": n, "problems": at.get(n, [])} for n in range(1, count + 1)]


def _editor(
    request: HttpRequest, cluster: VirtualCluster, pipeline: Pipeline | None
) -> HttpResponse:
    """The editor of a new pipeline (`pipeline` None) or of a pipeline's next version:
    GET shows the current configuration; POST's ``action`` validates, dry-runs or saves."""
    may_act = _may_act(request)
    name = pipeline.name if pipeline else ""
    config = services.current_version(pipeline).config if pipeline else STARTER
    problems: list[Problem] = []
    result: dict[str, Any] | None = None
    checked = False
    name_error = ""
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "validate")
        config = request.POST.get("config", "").replace("\r\n", "\n")
        name = pipeline.name if pipeline else request.POST.get("name", "").strip()
        try:
            if len(config) > MAX_CONFIG_CHARS:
                config_check(cluster, config)  # says how long a configuration may be
            if action == "save":
                if pipeline is None:
                    created = services.pipeline_create(cluster=cluster, name=name, config=config)
                    messages.success(
                        request, f"Pipeline {created.name} created (paused): start it when ready."
                    )
                    return redirect("pipeline-detail", cluster.public_id, created.name)
                version = services.pipeline_configure(pipeline=pipeline, config=config)
                messages.success(
                    request,
                    f"Version {version.version} saved: the agents running {pipeline.name} "
                    "switch to it within seconds.",
                )
                return redirect("pipeline-detail", cluster.public_id, pipeline.name)
            if action == "dry_run":
                result = dry_run.topics_dry_run(cluster, config=config, limit=DRY_RUN_SAMPLES)
                problems = [Problem(**p) for p in result.get("problems") or []]
            else:
                config_check(cluster, config)
            checked = not problems
        except ConfigInvalid as exc:
            problems = exc.problems
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {"name": exc.messages}
            name_error = " ".join(m for ms in errors.values() for m in ms)
        except BrowseNotFound as exc:
            messages.error(request, f"The dry run found nothing to read: {exc}")
        except BrowseUnavailable as exc:
            messages.error(request, str(exc))
        if problems or name_error:
            status = 400
    context = {
        "cluster": cluster,
        "pipeline": pipeline,
        "name": name,
        "name_error": name_error,
        "config": config,
        "lines": _numbered(config, problems),
        "problems": problems,
        "checked": checked,
        "result": result,
        "may_act": may_act,
    }
    return render(request, "virtualclusters/pipeline_edit.html", context, status=status)


@login_required
@require_GET
def pipeline_list(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    context = {
        "cluster": cluster,
        "pipelines": selectors.pipelines_listed(cluster),
        "may_act": _may_act(request),
        "refresh_ms": REFRESH_MS,
    }
    return render(request, "virtualclusters/pipelines.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def pipeline_new(request: HttpRequest, cluster_id: str) -> HttpResponse:
    return _editor(request, cluster_or_404(request, cluster_id), None)


@login_required
@require_http_methods(["GET", "POST"])
def pipeline_edit(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    return _editor(request, cluster, _pipeline_or_404(cluster, name))


def _version_number(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


@login_required
@require_GET
def pipeline_detail(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    """A pipeline's live status (reloaded every few seconds), its versions, and the diff
    of two of them (``?from=1&to=2``)."""
    cluster = cluster_or_404(request, cluster_id)
    pipeline = _pipeline_or_404(cluster, name)
    versions = list(selectors.versions_of(pipeline))
    by_number = {v.version: v for v in versions}
    newer = _version_number(request.GET.get("to")) or pipeline.current_version
    older = _version_number(request.GET.get("from"))
    if older is None and newer - 1 in by_number:
        older = newer - 1
    diff = None
    if older in by_number and newer in by_number and older is not None:
        diff = diff_lines(
            by_number[older].config,
            by_number[newer].config,
            old_name=f"version {older}",
            new_name=f"version {newer}",
        )
    context = {
        "cluster": cluster,
        "pipeline": selectors.pipeline_detail(pipeline),
        "versions": versions,
        "diff": diff,
        "diff_from": older,
        "diff_to": newer,
        "may_act": _may_act(request),
        "refresh_ms": REFRESH_MS,
    }
    return render(request, "virtualclusters/pipeline.html", context)


@login_required
@require_POST
def pipeline_state(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    pipeline = _pipeline_or_404(cluster, name)
    state = request.POST.get("state", "")
    try:
        services.pipeline_state_set(pipeline=pipeline, state=state)
    except ValidationError:
        messages.error(request, "A pipeline is running or paused.")
    else:
        if state == Pipeline.State.RUNNING:
            messages.success(
                request,
                f"{pipeline.name} started: the pipelines-role agents take it within seconds.",
            )
        else:
            messages.success(request, f"{pipeline.name} paused: its agents stop it within seconds.")
    return redirect("pipeline-detail", cluster.public_id, pipeline.name)


@login_required
@require_http_methods(["GET", "POST"])
def pipeline_delete(request: HttpRequest, cluster_id: str, name: str) -> HttpResponse:
    """GET: what deleting does, and a button; POST: delete the pipeline."""
    cluster = cluster_or_404(request, cluster_id)
    pipeline = _pipeline_or_404(cluster, name)
    if request.method == "POST":
        services.pipeline_delete(pipeline=pipeline)
        messages.success(request, f"Pipeline {name} deleted.")
        return redirect("cluster-pipelines", cluster.public_id)
    context = {
        "cluster": cluster,
        "pipeline": selectors.pipeline_detail(pipeline),
        "may_act": _may_act(request),
    }
    return render(request, "virtualclusters/pipeline_delete.html", context)


urlpatterns = [
    path("clusters/<str:cluster_id>/pipelines/", pipeline_list, name="cluster-pipelines"),
    path("clusters/<str:cluster_id>/pipelines/new", pipeline_new, name="pipeline-new"),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/", pipeline_detail, name="pipeline-detail"
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/edit", pipeline_edit, name="pipeline-edit"
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/state",
        pipeline_state,
        name="pipeline-state",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/delete",
        pipeline_delete,
        name="pipeline-delete",
    ),
]
