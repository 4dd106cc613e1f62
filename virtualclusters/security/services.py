"""Writes and reads for SASL credentials and ACLs; the REST API, the console and the agent
API all go through these functions.

Passwords are turned into verifiers here (``core.security.scram``) and forgotten: the
plaintext is returned once by ``sasl_credential_create`` and stored nowhere.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Max

from core.security.acl import AclBinding, AclFilter
from core.security.scram import plain_hash, scram_credential
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


def sasl_credential_for_agent(cluster: VirtualCluster, username: str) -> dict:
    """What an agent needs to check a login of ``username``: verifiers, never a password."""
    credential = SaslCredential.objects.filter(cluster=cluster, username=username).first()
    if credential is None:
        return {"found": False}
    return {
        "found": True,
        "username": credential.username,
        "superuser": credential.superuser,
        "read_only": credential.read_only,
        "plain": credential.plain_hash,
        "scram": {
            "SCRAM-SHA-256": credential.scram_sha256,
            "SCRAM-SHA-512": credential.scram_sha512,
        },
    }


# --- ACLs --------------------------------------------------------------------------------


def acl_binding(data: dict) -> AclBinding:
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


def _bindings(acls) -> list[tuple[Acl, AclBinding]]:
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
