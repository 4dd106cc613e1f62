"""`SchemaValidator.problem` over whole batches: which record it names, and how few
registry questions it asks (one per distinct framing, then none while cached). The
registry here is a stand-in that answers `schema_uses` the way the control plane does;
the real one is exercised end to end in test_validation.py."""

from __future__ import annotations

import asyncio
from typing import Any

from agents.schema_registry.registry import RestError
from agents.schema_registry.validation import SchemaValidator
from core.kafka.records import RecordInput, encode_batch


class Registry:
    """Schema 7 is registered under "t-value" and "t-key"; nothing else is."""

    id_ttl_s = 60.0

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def call(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        assert name == "schema_uses"
        self.calls.append(body["id"])
        if body["id"] != 7:
            raise RestError(40403, "Schema not found")
        return {"uses": [{"subject": "t-value", "version": 1}, {"subject": "t-key", "version": 1}]}


def framed(schema_id: int) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + b"\x02"


def check(validator: SchemaValidator, parts: tuple[str, ...], *batches: bytes):
    views = [memoryview(b) for b in batches]
    return asyncio.run(validator.problem("t", {}, parts, views))


def test_it_names_the_first_bad_record_of_the_batch():
    validator = SchemaValidator(Registry())  # type: ignore[arg-type]
    batch = encode_batch(
        [RecordInput(value=framed(7), timestamp=1)] * 3
        + [RecordInput(value=framed(9), timestamp=1), RecordInput(value=b"plain", timestamp=1)]
    )
    index, why = check(validator, ("value",), batch)
    assert index == 3 and "schema id 9" in why


def test_an_unframed_record_before_an_unknown_id_is_the_one_named():
    validator = SchemaValidator(Registry())  # type: ignore[arg-type]
    batch = encode_batch(
        [RecordInput(value=framed(7), timestamp=1), RecordInput(value=None, timestamp=1)]
        + [RecordInput(value=framed(9), timestamp=1)]
    )
    index, why = check(validator, ("value",), batch)
    assert index == 1 and "wire format" in why


def test_keys_are_checked_when_asked():
    validator = SchemaValidator(Registry())  # type: ignore[arg-type]
    batch = encode_batch([RecordInput(key=framed(7), value=framed(7), timestamp=1)] * 2)
    assert check(validator, ("key", "value"), batch) is None
    bad_key = encode_batch(
        [RecordInput(key=framed(7), value=framed(7), timestamp=1)]
        + [RecordInput(key=b"k", value=framed(7), timestamp=1)]
    )
    assert check(validator, ("value",), bad_key) is None
    assert check(validator, ("key", "value"), bad_key)[0] == 1


def test_a_framing_is_asked_about_once_then_cached():
    registry = Registry()
    validator = SchemaValidator(registry)  # type: ignore[arg-type]
    batch = encode_batch([RecordInput(value=framed(7), timestamp=n) for n in range(500)])
    assert check(validator, ("value",), batch, batch) is None
    assert check(validator, ("value",), batch) is None
    assert registry.calls == [7]


def test_a_garbled_batch_is_refused_with_a_message_not_an_exception():
    validator = SchemaValidator(Registry())  # type: ignore[arg-type]
    batch = bytearray(encode_batch([RecordInput(value=framed(7), timestamp=1)] * 2))
    batch[61] = 0x7E  # the first record's length: 63 bytes, more than the batch holds
    index, why = check(validator, ("value",), bytes(batch))
    assert index == 0 and "corrupt" in why
    short = bytes(encode_batch([RecordInput(value=framed(7), timestamp=1)])[:40])
    index, why = check(validator, ("value",), short)
    assert index == 0 and "truncated record batch" in why


def test_a_value_shorter_than_a_framing_is_named():
    validator = SchemaValidator(Registry())  # type: ignore[arg-type]
    batch = encode_batch(
        [RecordInput(value=framed(7), timestamp=1), RecordInput(value=b"\x00\x00", timestamp=1)]
    )
    assert check(validator, ("value",), batch) == (
        1,
        "the record's value is not in the schema registry's wire format "
        "(magic byte 0 and a schema id)",
    )
