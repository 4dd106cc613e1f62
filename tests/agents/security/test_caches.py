"""The agent's credential and ACL caches, against a scripted control plane."""

from __future__ import annotations

import asyncio

import pytest

from agents.control_plane import ControlPlaneUnavailable
from agents.security.caches import AclCache, CredentialCache
from core.security.acl import AclOperation, ResourceType

ACL = {
    "resource_type": "topic",
    "resource_name": "t",
    "pattern_type": "literal",
    "principal": "User:a",
    "host": "*",
    "operation": "read",
    "permission": "allow",
}


class ScriptedClient:
    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict]] = []

    async def _answer(self, name, body):
        self.calls.append((name, body))
        await asyncio.sleep(0.01)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def call(self, name, body, *, timeout_s=None):
        return await self._answer(name, body)

    async def call_with_retries(self, name, body, **_):
        return await self._answer(name, body)


def test_concurrent_logins_of_one_user_share_one_lookup_and_it_is_cached():
    client = ScriptedClient([{"found": True, "username": "a", "superuser": True, "plain": "h"}])
    cache = CredentialCache(client)

    async def go():
        results = await asyncio.gather(*(cache.get("a") for _ in range(5)))
        again = await cache.get("a")
        return results, again

    results, again = asyncio.run(go())
    assert len(client.calls) == 1
    assert all(r.superuser and r.username == "a" for r in results) and again is results[0]


def test_unknown_users_are_remembered_briefly():
    client = ScriptedClient([{"found": False}])
    cache = CredentialCache(client, negative_ttl_s=0.05)

    async def go():
        assert await cache.get("x") is None
        assert await cache.get("x") is None
        await asyncio.sleep(0.06)
        assert await cache.get("x") is None

    asyncio.run(go())
    assert len(client.calls) == 2


def test_acl_cache_sends_its_version_and_keeps_the_last_set_when_unreachable():
    client = ScriptedClient(
        [
            {"version": "v1", "acls": [ACL]},
            {"version": "v1", "acls": None},  # unchanged
            ControlPlaneUnavailable("down", outcome_unknown=False),
        ]
    )
    cache = AclCache(client, refresh_s=0.0)

    async def go():
        first = await cache.authorizer()
        second = await cache.authorizer()
        third = await cache.authorizer()
        return first, second, third

    first, second, third = asyncio.run(go())
    assert first is second is third  # unchanged, then unreachable: the same rules
    assert first.allows("User:a", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert [body for _, body in client.calls] == [
        {"version": None},
        {"version": "v1"},
        {"version": "v1"},
    ]


def test_acl_cache_without_any_answer_fails_closed():
    client = ScriptedClient([ControlPlaneUnavailable("down", outcome_unknown=False)])
    with pytest.raises(ControlPlaneUnavailable):
        asyncio.run(AclCache(client).authorizer())
