"""Schema texts for the console and the REST API, read by a live agent of the cluster
over the browse channel (`virtualclusters.browsing.asking`), as the message browser
reads records.

The texts live only in the cluster's bucket (``<cluster>/_schemas/<fingerprint>.json``),
which the control plane holds no credentials for: the request names fingerprints from
the metadata store, an agent reads their documents and posts them back
(``browse/answer``, checked by `texts_check`), and they are passed on to the person who
asked, never stored nor parsed here.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from metadata_store.agent_api import schemas
from metadata_store.clusters import VirtualCluster
from virtualclusters.browsing.agent_api import answer_decoded
from virtualclusters.browsing.asking import agent_ask

KIND = "schema_texts"
MAX_TEXTS = 4  # a version, and the one it is compared with, is two
# The agents refuse texts over 256 KiB (42201); JSON escaping can double a text.
MAX_ANSWER_BYTES = MAX_TEXTS * 1024 * 1024
FINGERPRINT = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]


class _Body(Struct, forbid_unknown_fields=False, frozen=True):
    pass


class TextReference(_Body, frozen=True):
    name: Annotated[str, Meta(max_length=1_000)]
    subject: Annotated[str, Meta(max_length=255)]
    version: Annotated[int, Meta(ge=1, le=2**31 - 1)]


class SchemaDocument(_Body, frozen=True):
    """A schema as the agent stored it in the bucket (agents.schema_registry.registry)."""

    schema: Annotated[str, Meta(max_length=512 * 1024)]
    schemaType: Annotated[str, Meta(pattern="^(AVRO|JSON|PROTOBUF)$")] = "AVRO"  # noqa: N815
    references: Annotated[list[TextReference], Meta(max_length=100)] = []


class SchemaTexts(_Body, frozen=True):
    texts: Annotated[dict[FINGERPRINT, SchemaDocument], Meta(max_length=MAX_TEXTS)]


_texts = msgspec.json.Decoder(SchemaTexts)


def texts_check(raw: bytes, owner: dict[str, Any]) -> dict[str, Any]:
    """An agent's answer to a ``schema_texts`` request as the console will read it: the
    documents of exactly the fingerprints asked, or `schemas.BadBody`."""
    answer = answer_decoded(raw, _texts, what="schema texts", max_bytes=MAX_ANSWER_BYTES)
    if sorted(answer.texts) != sorted(owner.get("fingerprints") or []):
        raise schemas.BadBody("schema texts: other fingerprints than the ones asked")
    checked: dict[str, Any] = msgspec.to_builtins(answer)
    return checked


def schema_texts(cluster: VirtualCluster, fingerprints: list[str]) -> dict[str, Any]:
    """``{"texts": {fingerprint: {"schema", "schemaType", "references"}}, "agent"}`` for
    up to `MAX_TEXTS` fingerprints, as a live agent of `cluster` (``agent``) reads them
    from its bucket. Raises the browse channel's errors (`BrowseUnavailable` and its
    kinds, `BrowseNotFound`)."""
    asked = sorted(set(fingerprints))
    if not 1 <= len(asked) <= MAX_TEXTS:
        raise ValueError(f"ask for 1 to {MAX_TEXTS} schema texts, not {len(asked)}")
    return agent_ask(cluster, {"kind": KIND, "fingerprints": asked}, what="the schema texts")
