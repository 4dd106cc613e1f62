"""Each pipeline's own Kafka principal: the SASL/SCRAM user ``pipeline-<name>`` with ACLs
for exactly what its configuration touches, handed to the agents that run it.

- READ on each input topic and on the consumer group (the configuration's, else
  ``floe-pipeline-<name>``);
- WRITE on each output topic and the dead-letter topic;
- WRITE on the transactional ids prefixed ``floe-pipeline-<pipeline id>-`` (the runner's
  transactional producers, one id per agent and input assignment).

(Kafka's READ and WRITE imply DESCRIBE.) The ACLs are rewritten with every new version;
they take effect where the cluster enforces ACLs (``acls_enabled``), and the user can log
in wherever a listener asks for SASL. The password is generated, stored sealed
(`tenancy.sealed`) and given only to the cluster's agents (``pipelines/assignments``)."""

from __future__ import annotations

from typing import Any

from core.pipelines import KafkaInput, PipelineSpec
from tenancy.sealed import SealBroken, secret_open, secret_seal
from virtualclusters.pipelines.models import Pipeline
from virtualclusters.security import services as security
from virtualclusters.security.models import Acl, SaslCredential

MECHANISM = "SCRAM-SHA-512"


def username(pipeline: Pipeline) -> str:
    return f"pipeline-{pipeline.name}"


def principal(pipeline: Pipeline) -> str:
    return f"User:{username(pipeline)}"


def transactional_id_prefix(pipeline: Pipeline) -> str:
    return f"floe-pipeline-{pipeline.public_id}-"


def consumer_group(pipeline: Pipeline, spec: PipelineSpec) -> str | None:
    """The consumer group of a Kafka-input pipeline (None for HTTP input)."""
    if not isinstance(spec.input, KafkaInput):
        return None
    return spec.input.group or f"floe-pipeline-{pipeline.name}"


def group_of(pipeline: Pipeline, canonical: dict[str, Any]) -> str | None:
    """`consumer_group` from a version's canonical form (``PipelineSpec.canonical()``)."""
    kafka = (canonical.get("input") or {}).get("kafka")
    if not isinstance(kafka, dict):
        return None
    return kafka.get("group") or f"floe-pipeline-{pipeline.name}"


def wanted_bindings(pipeline: Pipeline, spec: PipelineSpec) -> list[dict[str, str]]:
    """The ACL bindings (the agent API's JSON shape) the pipeline's principal needs."""
    who = principal(pipeline)

    def allow(
        resource_type: str, name: str, operation: str, pattern: str = "literal"
    ) -> dict[str, str]:
        return {
            "resource_type": resource_type,
            "resource_name": name,
            "pattern_type": pattern,
            "principal": who,
            "host": "*",
            "operation": operation,
            "permission": "allow",
        }

    bindings = [allow("topic", t, "read") for t in sorted(spec.topics_read())]
    group = consumer_group(pipeline, spec)
    if group:
        bindings.append(allow("group", group, "read"))
    bindings += [allow("topic", t, "write") for t in sorted(spec.topics_written())]
    bindings.append(
        allow("transactional_id", transactional_id_prefix(pipeline), "write", "prefixed")
    )
    return bindings


def principal_create(*, pipeline: Pipeline) -> None:
    """Make the pipeline's SASL user (a generated password, kept sealed on the
    pipeline). A user of that name already there is a conflict (`tenancy.errors`)."""
    _, password = security.sasl_credential_create(
        cluster=pipeline.cluster, username=username(pipeline)
    )
    pipeline.password_sealed = secret_seal(password)
    pipeline.save(update_fields=["password_sealed", "updated_at"])


def principal_acls_set(*, pipeline: Pipeline, spec: PipelineSpec) -> None:
    """Make the principal's ACLs exactly `wanted_bindings` (rows are only created and
    deleted, as every ACL: agents' caches key on that)."""
    wanted = {tuple(sorted(b.items())) for b in wanted_bindings(pipeline, spec)}
    held = list(Acl.objects.filter(cluster=pipeline.cluster, principal=principal(pipeline)))
    for acl in held:
        key = tuple(sorted(acl.binding_json().items()))
        if key in wanted:
            wanted.discard(key)
        else:
            security.acl_delete(acl=acl)
    for key in sorted(wanted):
        security.acl_create(cluster=pipeline.cluster, binding=security.acl_binding(dict(key)))


def principal_delete(*, pipeline: Pipeline) -> None:
    """Remove the pipeline's SASL user and its ACLs."""
    for acl in Acl.objects.filter(cluster=pipeline.cluster, principal=principal(pipeline)):
        security.acl_delete(acl=acl)
    for credential in SaslCredential.objects.filter(
        cluster=pipeline.cluster, username=username(pipeline)
    ):
        security.sasl_credential_delete(credential=credential)


def credentials(pipeline: Pipeline) -> dict[str, Any]:
    """What a runner needs to log in as the pipeline (``pipelines/assignments``)."""
    found: dict[str, Any] = {
        "mechanism": MECHANISM,
        "username": username(pipeline),
        "password": None,
        "principal": principal(pipeline),
    }
    try:
        found["password"] = secret_open(pipeline.password_sealed)
    except SealBroken as exc:
        found["error"] = f"{exc}: pause and start the pipeline to make a new password"
    return found


def principal_ensure(*, pipeline: Pipeline, spec: PipelineSpec | None) -> None:
    """Make the principal whole again before the pipeline starts: a new password when the
    sealed one cannot be opened (the SECRET_KEY was rotated) or the SASL user was deleted
    meanwhile (the Security page), and the ACLs its current version needs."""
    try:
        secret_open(pipeline.password_sealed)
        exists = SaslCredential.objects.filter(
            cluster=pipeline.cluster, username=username(pipeline)
        ).exists()
    except SealBroken:
        exists = False
    if not exists:
        SaslCredential.objects.filter(
            cluster=pipeline.cluster, username=username(pipeline)
        ).delete()
        principal_create(pipeline=pipeline)
    if spec is not None:
        principal_acls_set(pipeline=pipeline, spec=spec)
