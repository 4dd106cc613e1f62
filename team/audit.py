"""The audit log: who created, changed or deleted clusters, keys, ACLs, SASL users, team
members, schema-registry subjects, migrations and pipelines, recorded in one place.

Model signals record every save and delete of the audited models, so no write path can
forget it (a write that is no model's save or delete — a subject's soft delete marks
its versions — or a model saved often by machines — a migration, by its copier's reports
— calls `event_record` itself); the actor is whoever the current request is for, set once per request: the
console's signed-in user (`AuditActorMiddleware`), an API key (the REST API's
authentication), else "system" (Celery, agents' Kafka admin calls).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest, HttpResponse

from team.models import AuditEvent

_actor: contextvars.ContextVar[tuple[object | None, str]] = contextvars.ContextVar(
    "floe_audit_actor", default=(None, "system")
)


# (A migration is also "cut over" and "stopped": `virtualclusters.mirror.services`; a
# pipeline "started" and "paused": `virtualclusters.pipelines.services`.)
ACTIONS = ("created", "changed", "revoked", "deleted", "cut over", "stopped", "started", "paused")
TARGET_TYPES = (
    "cluster",
    "agent_key",
    "api_key",
    "sasl_user",
    "acl",
    "member",
    "invitation",
    "schema_subject",
    "migration",
    "pipeline",
)


def audit_events(org: Any, *, action: str = "", target_type: str = "", actor: str = "") -> Any:
    """The organization's events, newest first, filtered (exact what, actor contains)."""
    events = AuditEvent.objects.for_org(org).order_by("-at", "-id")
    if action:
        events = events.filter(action=action)
    if target_type:
        events = events.filter(target_type=target_type)
    if actor:
        events = events.filter(actor_label__icontains=actor)
    return events


def actor_label() -> str:
    """Who the writes of the current request are for, as the audit log names them."""
    return _actor.get()[1]


def set_actor(user: Any, label: str) -> None:
    """Who the writes of the current request are for (a user, or None and a label)."""
    _actor.set((user, label))


class AuditActorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        token = _actor.set(
            (user, user.email) if user is not None and user.is_authenticated else (None, "system")
        )
        try:
            return self.get_response(request)
        finally:
            _actor.reset(token)


def _organization(instance: Any) -> Any:
    for path in ("organization", "cluster.organization"):
        obj = instance
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - a parent already gone (cascade)
            continue
        return obj
    return None


def _name(instance: Any) -> str:
    for attribute in ("name", "username", "email"):
        value = getattr(instance, attribute, None)
        if value:
            return str(value)
    if hasattr(instance, "user_id"):
        return getattr(instance.user, "email", "")
    return str(instance)[:200]


def event_record(
    *, organization_id: int, action: str, target_type: str, target_id: str, target_name: str
) -> None:
    """Record that the current request's actor did `action` to a target."""
    user, label = _actor.get()
    AuditEvent.objects.create(
        organization_id=organization_id,
        actor=user if isinstance(user, User) and user.pk else None,
        actor_label=label,
        action=action,
        target_type=target_type,
        target_id=target_id[:64],
        target_name=target_name[:255],
    )


def _record(instance: Any, action: str) -> None:
    org = _organization(instance)
    if org is None or org.pk is None:
        return
    event_record(
        organization_id=org.pk,
        action=action,
        target_type=AUDITED[type(instance)],
        target_id=str(getattr(instance, "public_id", "") or instance.pk),
        target_name=_name(instance),
    )


def _saved(sender: Any, instance: Any, created: bool, update_fields: Any = None, **_: Any) -> None:
    if created:
        action = "created"
    elif update_fields and "revoked_at" in update_fields:
        action = "revoked"
    else:
        action = "changed"
    _record(instance, action)


def _deleted(sender: Any, instance: Any, **_: Any) -> None:
    _record(instance, "deleted")


AUDITED: dict[type, str] = {}


def connect(audited: dict[type, str]) -> None:
    """Record every save and delete of ``audited`` (model → its target type, one of
    ``TARGET_TYPES``). Called once at start-up by the project (``ControlPlaneConfig.ready``),
    which names the audited models of every app: the audit log imports none of them."""
    AUDITED.update(audited)
    for model in AUDITED:
        post_save.connect(_saved, sender=model, dispatch_uid=f"audit-save-{model.__name__}")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"audit-del-{model.__name__}")
