"""Writes and reads for SASL credentials and ACLs; the REST API, the console and the agent
API all go through these functions.

Passwords are turned into verifiers here (``core.security.scram``) and forgotten: the
plaintext is returned once by ``sasl_credential_create`` and stored nowhere.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Max

from core.kafka.errors import ErrorCode
from core.security.acl import AclBinding, AclFilter
from core.security.scram import plain_hash, scram_credential, scram_verifier
from tenancy.errors import conflict
from virtualclusters.models import VirtualCluster
from virtualclusters.security.models import Acl, SaslCredential

USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")
USERNAME_RULE = "1-128 letters, digits, '.', '_', '@', '+' or '-', starting with a letter or digit"
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 256


USERNAME_TAKEN = "A SASL user with this name already exists in this cluster."


def _check_password(password: str) -> None:
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise ValidationError(
            {
                "password": [
                    f"A password needs {MIN_PASSWORD_LENGTH}-{MAX_PASSWORD_LENGTH} characters "
                    "(or leave it out to get a generated one)."
                ]
            }
        )
    if "\0" in password:
        raise ValidationError({"password": ["A password cannot contain a NUL character."]})


@transaction.atomic
def sasl_credential_create(
    *,
    cluster: VirtualCluster,
    username: str,
    password: str | None = None,
    superuser: bool = False,
    read_only: bool = False,
) -> tuple[SaslCredential, str]:
    """A new SASL user of ``cluster``; returns it and its password (generated when None).

    The password works with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
    """
    username = (username or "").strip()
    if not USERNAME.fullmatch(username):
        raise ValidationError({"username": [f"A username is {USERNAME_RULE}."]})
    if superuser and read_only:
        raise ValidationError(
            {"read_only": ["A credential cannot be both a superuser and read-only."]}
        )
    if password is None or password == "":
        password = secrets.token_urlsafe(24)
    _check_password(password)
    if SaslCredential.objects.filter(cluster=cluster, username=username).exists():
        raise conflict("username", USERNAME_TAKEN)
    try:
        with transaction.atomic():
            credential = SaslCredential.objects.create(
                cluster=cluster,
                username=username,
                superuser=superuser,
                read_only=read_only,
                plain_hash=plain_hash(password),
                scram_sha256=scram_credential(password, "SCRAM-SHA-256"),
                scram_sha512=scram_credential(password, "SCRAM-SHA-512"),
            )
    except IntegrityError:
        raise conflict("username", USERNAME_TAKEN) from None
    return credential, password


@transaction.atomic
def sasl_credential_delete(*, credential: SaslCredential) -> None:
    """Delete a SASL user: agents refuse new logins within seconds (their cache TTL)."""
    credential.delete()


def sasl_credential_for_agent(cluster: VirtualCluster, username: str) -> dict[str, Any]:
    """What an agent needs to check a login of ``username``: verifiers, never a password
    (a mechanism the user has no verifier for is left out: its logins fail)."""
    credential = SaslCredential.objects.filter(cluster=cluster, username=username).first()
    if credential is None:
        return {"found": False}
    return {
        "found": True,
        "username": credential.username,
        "superuser": credential.superuser,
        "read_only": credential.read_only,
        "plain": credential.plain_hash,
        "scram": _verifiers(credential),
    }


# --- SCRAM credentials over the Kafka protocol (KIP-554) ----------------------------------

SCRAM_FIELDS = {"SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}


def _verifiers(credential: SaslCredential) -> dict[str, dict[str, Any]]:
    found = {m: getattr(credential, field) for m, field in SCRAM_FIELDS.items()}
    return {m: verifier for m, verifier in found.items() if verifier}


def _result(user: str, error: int = 0, message: str | None = None, **more: Any) -> dict[str, Any]:
    return {"user": user, "error_code": int(error), "error_message": message, **more}


def scram_credentials_describe(
    cluster: VirtualCluster, users: list[str] | None
) -> list[dict[str, Any]]:
    """DescribeUserScramCredentials: each user's SCRAM mechanisms and iterations — every
    user that has any when `users` is None, else the named ones (RESOURCE_NOT_FOUND for
    one without, DUPLICATE_RESOURCE for a name asked twice)."""
    rows = SaslCredential.objects.filter(cluster=cluster).order_by("username")
    if users is not None:
        rows = rows.filter(username__in=users)
    known = {c.username: _verifiers(c) for c in rows}
    infos = {
        name: [{"mechanism": m, "iterations": int(v["iterations"])} for m, v in verifiers.items()]
        for name, verifiers in known.items()
    }
    if users is None:
        return [_result(name, credential_infos=i) for name, i in infos.items() if i]
    results = []
    for name in dict.fromkeys(users):
        if users.count(name) > 1:
            results.append(_result(name, ErrorCode.DUPLICATE_RESOURCE, "the user was named twice"))
        elif not infos.get(name):
            results.append(
                _result(name, ErrorCode.RESOURCE_NOT_FOUND, "the user has no SCRAM credential")
            )
        else:
            results.append(_result(name, credential_infos=infos[name]))
    return results


def _alteration_problem(item: dict[str, Any], twice: bool) -> tuple[int, str] | None:
    if twice:
        return ErrorCode.DUPLICATE_RESOURCE, "a credential cannot be altered twice in one request"
    if item["mechanism"] not in SCRAM_FIELDS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "the mechanism is not SCRAM-SHA-256/512"
    if not USERNAME.fullmatch(item["name"]):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"a username is {USERNAME_RULE}"
    if "iterations" in item:
        try:
            item["verifier"] = scram_verifier(
                item["mechanism"], item["salted_password"], item["salt"], item["iterations"]
            )
        except ValueError as exc:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)
    return None


@transaction.atomic
def scram_credentials_alter(
    cluster: VirtualCluster, deletions: list[dict[str, Any]], upsertions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """AlterUserScramCredentials: one result per user, in order of first mention. A user
    with any refused alteration gets none of them; a user created here has only the SCRAM
    mechanisms given (PLAIN needs the password, which never comes); a user left with no
    credential at all is deleted."""
    items = [*deletions, *upsertions]
    seen = [(i["name"], i["mechanism"]) for i in items]
    problems: dict[str, tuple[int, str]] = {}
    for item, key in zip(items, seen, strict=True):
        problem = _alteration_problem(item, seen.count(key) > 1)
        if problem is not None:
            problems.setdefault(item["name"], problem)
    names = list(dict.fromkeys(i["name"] for i in items))
    rows = {
        c.username: c
        for c in SaslCredential.objects.select_for_update().filter(
            cluster=cluster, username__in=names
        )
    }
    for item in deletions:
        row = rows.get(item["name"])
        if item["name"] not in problems and (
            row is None or not _verifiers(row).get(item["mechanism"])
        ):
            problems[item["name"]] = (ErrorCode.RESOURCE_NOT_FOUND, "no such SCRAM credential")
    changed: set[str] = set()
    for item in items:
        name = item["name"]
        if name in problems:
            continue
        row = rows.get(name)
        if row is None:
            row = rows[name] = SaslCredential(
                cluster=cluster, username=name, plain_hash="", scram_sha256={}, scram_sha512={}
            )
        setattr(row, SCRAM_FIELDS[item["mechanism"]], item.get("verifier") or {})
        changed.add(name)
    for name in sorted(changed):
        row = rows[name]
        if not row.plain_hash and not _verifiers(row):
            if row.pk is not None:
                row.delete()
        else:
            row.save()
    return [_result(name, *problems.get(name, (0, None))) for name in names]


# --- ACLs --------------------------------------------------------------------------------


def acl_binding(data: dict[str, Any]) -> AclBinding:
    """A validated binding from its JSON shape; ``ValidationError`` with a message otherwise."""
    try:
        binding = AclBinding.from_json(data)
    except KeyError as exc:
        raise ValidationError({exc.args[0]: ["This field is required."]}) from None
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    problem = binding.problem()
    if problem:
        raise ValidationError(problem)
    return binding


@transaction.atomic
def acl_create(*, cluster: VirtualCluster, binding: AclBinding) -> tuple[Acl, bool]:
    """Store a binding; an identical one already there is returned as is (as Kafka)."""
    acl, created = Acl.objects.get_or_create(cluster=cluster, **binding.to_json())
    return acl, created


@transaction.atomic
def acl_delete(*, acl: Acl) -> None:
    acl.delete()


def _bindings(acls: Iterable[Acl]) -> list[tuple[Acl, AclBinding]]:

    return [(acl, AclBinding.from_json(acl.binding_json())) for acl in acls]


def acls_matching(cluster: VirtualCluster, acl_filter: AclFilter) -> list[Acl]:
    """The cluster's bindings a DescribeAcls/DeleteAcls filter matches (KIP-290 rules)."""
    rows = Acl.objects.filter(cluster=cluster).order_by("id")
    return [acl for acl, binding in _bindings(rows) if acl_filter.matches(binding)]


@transaction.atomic
def acls_delete_matching(*, cluster: VirtualCluster, filters: list[AclFilter]) -> list[list[Acl]]:
    """Delete every binding matching each filter; per filter, the bindings it removed."""
    rows = _bindings(Acl.objects.select_for_update().filter(cluster=cluster).order_by("id"))
    deleted_ids: set[int] = set()
    results = []
    for acl_filter in filters:
        matched = [acl for acl, b in rows if acl.pk not in deleted_ids and acl_filter.matches(b)]
        deleted_ids.update(acl.pk for acl in matched)
        results.append(matched)
    if deleted_ids:
        Acl.objects.filter(pk__in=deleted_ids).delete()
    return results


def acl_version(cluster: VirtualCluster) -> str:
    """Changes whenever the cluster's ACL set does (rows are only created and deleted:
    a create raises the highest id, a delete lowers the count). Opaque to agents."""
    stats = Acl.objects.filter(cluster=cluster).aggregate(count=Count("id"), top=Max("id"))
    raw = f"{cluster.pk}:{stats['count']}:{stats['top'] or 0}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]
