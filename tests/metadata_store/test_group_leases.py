"""Group leases in the metadata store (issue 24): the agent-API calls, their tenancy and
fencing, and a state machine over the ownership rule against the real database
functions — agents acquiring, renewing, dying, pausing, their clocks running fast or
slow within the lease's margin: at most one agent ever believes it holds a group, and a
fenced holder's writes (state saves, offset commits) are refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from core.kafka.errors import ErrorCode as E
from metadata_store.group_leases import group_leases_exchange, group_state_save
from metadata_store.group_offsets import group_offsets_commit
from metadata_store.models import Agent, GroupLease, GroupOffset

pytestmark = pytest.mark.django_db

TTL_MS, MARGIN_MS = 4000, 1000  # the agents' defaults (agents.groups.leases)


def register(cluster, *agent_ids: str) -> None:
    for agent_id in agent_ids:
        Agent.objects.create(
            cluster=cluster, agent_id=agent_id, host="127.0.0.1", port=9092,
            last_heartbeat=timezone.now(),
        )  # fmt: skip


def member(member_id: str, instance: str | None = None) -> dict:
    return {
        "member_id": member_id,
        "group_instance_id": instance,
        "client_id": "c",
        "client_host": "/127.0.0.1",
        "session_timeout_ms": 6000,
        "rebalance_timeout_ms": 6000,
        "protocols": [{"name": "range", "metadata": "AAE="}],
        "assignment": "AAI=",
    }


def save_body(agent_id: str, epoch: int, generation: int, members: list[dict]) -> dict:
    return {
        "agent_id": agent_id,
        "group_id": "g",
        "epoch": epoch,
        "generation": generation,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "leader": members[0]["member_id"] if members else None,
        "members": members,
    }


def offsets_body(**fence) -> dict:
    return {"group_id": "g", "offsets": [{"topic": "t", "partition": 0, "offset": 5}], **fence}


def codes(answer: dict) -> list[int]:
    return [o["error_code"] for o in answer["offsets"]]


def test_one_agent_holds_a_group_and_the_others_are_told_who(agent_api, alice):
    register(alice["cluster"], "a1", "a2")
    got = agent_api("groups/leases", {"agent_id": "a1", "acquire": ["g"]})
    assert [(x["agent_id"], x["epoch"]) for x in got["leases"]] == [("a1", 1)]
    assert got["leases"][0]["state"]["members"] == []
    told = agent_api("groups/leases", {"agent_id": "a2", "acquire": ["g"]})
    assert [(x["agent_id"], x["epoch"], x["state"]) for x in told["leases"]] == [("a1", 1, None)]
    assert 0 < told["leases"][0]["expires_in_ms"] <= TTL_MS
    # a2 cannot renew or release what a1 holds; a1 renews; a release frees it at once.
    assert agent_api("groups/leases", {"agent_id": "a2", "renew": [{"group_id": "g", "epoch": 1}]})[
        "lost"
    ] == ["g"]
    assert agent_api("groups/leases", {"agent_id": "a1", "renew": [{"group_id": "g", "epoch": 1}]})[
        "renewed"
    ] == ["g"]
    agent_api("groups/leases", {"agent_id": "a1", "release": [{"group_id": "g", "epoch": 1}]})
    taken = agent_api("groups/leases", {"agent_id": "a2", "acquire": ["g"]})["leases"][0]
    assert (taken["agent_id"], taken["epoch"]) == ("a2", 2)
    # An offer gives a free lease to the rendezvous choice, never a held one.
    offered = agent_api(
        "groups/leases", {"agent_id": "a1", "offer": [{"group_id": "h", "agent_id": "a2"}]}
    )
    assert [(x["agent_id"], x["state"]) for x in offered["leases"]] == [("a2", None)]
    again = agent_api(
        "groups/leases", {"agent_id": "a2", "offer": [{"group_id": "g", "agent_id": "a1"}]}
    )
    assert again["leases"][0]["agent_id"] == "a2"


def test_a_lease_kept_through_an_outage_resumes_unless_someone_took_it(alice):
    """Ripcord: a holder cut off from the store keeps its groups; when it is back, a
    `resume` renews the lease even though it expired meanwhile — unless another agent
    took it (a new epoch), and then it is lost, as a plain renewal of it would be."""
    cluster = alice["cluster"]
    register(cluster, "a1", "a2")
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def exchange(agent_id: str, at_s: float, **parts) -> dict:
        parts = {"acquire": [], "renew": [], "release": [], **parts}
        return group_leases_exchange(
            cluster_id=cluster.pk, agent_id=agent_id, ttl_ms=TTL_MS,
            now=start + timedelta(seconds=at_s), **parts,
        )  # fmt: skip

    assert exchange("a1", 0, acquire=["g", "h"])["leases"][0]["epoch"] == 1
    # 10 s of outage later both leases have expired; a plain renewal is refused...
    assert exchange("a1", 10, renew=[("g", 1)])["lost"] == ["g"]
    # ...a resume is not: nobody took them.
    back = exchange("a1", 10, resume=[("g", 1), ("h", 1)])
    assert sorted(back["renewed"]) == ["g", "h"] and back["lost"] == []
    assert exchange("a2", 12, acquire=["g"])["leases"][0]["agent_id"] == "a1"  # live again
    # An agent took h after it expired: a1's resume of it is refused, and stays refused.
    taken = exchange("a2", 30, acquire=["h"])["leases"][0]
    assert (taken["agent_id"], taken["epoch"]) == ("a2", 2)
    late = exchange("a1", 31, resume=[("h", 1), ("g", 1)])
    assert late["lost"] == ["h"] and late["renewed"] == ["g"]
    assert GroupLease.objects.get(cluster=cluster, group_id="h").agent_id == "a2"


def test_it_refuses_agents_the_cluster_does_not_know_and_bad_bodies(agent_api, alice):
    register(alice["cluster"], "a1")
    response = agent_api.raw("groups/leases", {"agent_id": "stranger", "acquire": ["g"]})
    assert response.status_code == 409 and "not registered" in response.json()["error"]
    response = agent_api.raw(
        "groups/leases", {"agent_id": "a1", "offer": [{"group_id": "g", "agent_id": "stranger"}]}
    )
    assert response.status_code == 409
    response = agent_api.raw("groups/leases", {"agent_id": "a1", "ttl_ms": 10})
    assert response.status_code == 400 and "ttl_ms" in response.json()["error"]
    response = agent_api.raw("groups/save", save_body("a1", 0, 1, []))
    assert response.status_code == 400 and "epoch" in response.json()["error"]


def test_a_lease_of_one_cluster_is_invisible_to_another(agent_api, bob_agent_api, alice, bob):
    register(alice["cluster"], "a1")
    register(bob["cluster"], "b1")
    agent_api("groups/leases", {"agent_id": "a1", "acquire": ["g"]})
    theirs = bob_agent_api("groups/leases", {"agent_id": "b1", "acquire": ["g"]})["leases"][0]
    assert (theirs["agent_id"], theirs["epoch"]) == ("b1", 1)
    # Bob's key cannot name Alice's agent, nor save into Alice's group.
    assert (
        bob_agent_api.raw("groups/leases", {"agent_id": "a1", "acquire": ["g"]}).status_code == 409
    )
    assert bob_agent_api("groups/save", save_body("a1", 1, 1, [member("m")]))["error_code"] == (
        E.NOT_COORDINATOR
    )
    assert GroupLease.objects.get(cluster=alice["cluster"], group_id="g").generation == 0


def test_commits_are_checked_against_the_lease_and_the_saved_generation(agent_api, alice):
    register(alice["cluster"], "a1", "a2")
    agent_api.create_topic("t")
    assert codes(agent_api("offsets/commit", offsets_body())) == [0]  # nobody holds "g"
    agent_api("groups/leases", {"agent_id": "a1", "acquire": ["g"]})
    members = [member("m1"), member("m2", instance="i2")]
    assert agent_api("groups/save", save_body("a1", 1, 3, members))["error_code"] == 0
    fence = {"agent_id": "a1", "epoch": 1}

    def commit(**kw) -> int:
        return codes(agent_api("offsets/commit", offsets_body(**fence, **kw)))[0]

    assert commit(generation=3, member_id="m1") == 0
    assert commit(generation=2, member_id="m1") == E.ILLEGAL_GENERATION
    assert commit(generation=3, member_id="ghost") == E.UNKNOWN_MEMBER_ID
    assert commit(generation=3, member_id="m9", group_instance_id="i2") == E.FENCED_INSTANCE_ID
    assert commit(generation=3, member_id="m2", group_instance_id="i2") == 0
    assert commit() == E.UNKNOWN_MEMBER_ID  # a simple commit to a group with members
    # Without the lease: refused whatever the member says.
    assert codes(agent_api("offsets/commit", offsets_body(generation=3, member_id="m1"))) == [
        E.NOT_COORDINATOR
    ]
    stale = {"agent_id": "a2", "epoch": 1}
    assert codes(
        agent_api("offsets/commit", offsets_body(**stale, generation=3, member_id="m1"))
    ) == [E.NOT_COORDINATOR]
    # The group empties: simple commits again (assign() consumers, admin tools).
    assert agent_api("groups/save", save_body("a1", 1, 4, []))["error_code"] == 0
    assert commit() == 0
    # …whatever member id it names (a KIP-848 consumer names itself before joining).
    assert commit(member_id="self-named") == 0
    assert GroupOffset.objects.get(group_id="g").committed_offset == 5


def test_a_consumer_protocol_groups_commits_need_the_members_epoch(agent_api, alice):
    register(alice["cluster"], "a1")
    agent_api.create_topic("t")
    agent_api("groups/leases", {"agent_id": "a1", "acquire": ["g"]})
    saved = {
        **save_body("a1", 1, 7, []),
        "group_type": "consumer",
        "protocol_name": "uniform",
        "leader": None,
        "extra": {"assignment_epoch": 7, "topics": {"t": [str(uuid.uuid4()), 1]}},
        "members": [
            {"member_id": "m1", "member_epoch": 7, "previous_member_epoch": 5,
             "topic_names": ["t"], "assigned": [["x", 0]], "target": [["x", 0]]},
        ],
    }  # fmt: skip
    assert agent_api("groups/save", saved)["error_code"] == 0
    fence = {"agent_id": "a1", "epoch": 1}

    def commit(**kw) -> int:
        return codes(agent_api("offsets/commit", offsets_body(**fence, **kw)))[0]

    assert commit(generation=7, member_id="m1") == 0
    assert commit(generation=5, member_id="m1") == 0  # the epoch it is revoking at
    assert commit(generation=6, member_id="m1") == E.STALE_MEMBER_EPOCH
    assert commit(generation=7, member_id="ghost") == E.UNKNOWN_MEMBER_ID
    assert commit() == E.UNKNOWN_MEMBER_ID
    state = agent_api("groups/leases", {"agent_id": "a1", "acquire": ["g"]})["leases"][0]
    assert state["state"]["group_type"] == "consumer"
    assert state["state"]["extra"]["assignment_epoch"] == 7
    assert state["state"]["members"][0]["assigned"] == [["x", 0]]


# -- the ownership rule, against a model --------------------------------------------------

AGENTS = ("a0", "a1", "a2")
GROUPS = ("g0", "g1")
T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Agent_:  # noqa: N801 - the model's agent, beside the Agent model
    """An agent as the model sees it: its clock (offset and rate against the database's)
    and the leases it believes it holds: group → (epoch, local deadline)."""

    def __init__(self, name: str, offset_s: float, rate: float) -> None:
        self.name, self.offset_s, self.rate = name, offset_s, rate
        self.alive = True
        self.leases: dict[str, tuple[int, float]] = {}

    def local(self, t: float) -> float:
        return self.offset_s + self.rate * t

    def believes(self, group: str, t: float) -> int | None:
        held = self.leases.get(group)
        return held[0] if held and self.local(t) < held[1] else None


def _machine(cluster, partition_topic: str):
    class Ownership(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            GroupLease.objects.filter(cluster=cluster).delete()
            GroupOffset.objects.filter(cluster=cluster).delete()
            self.t = 0.0  # the database's clock, seconds after T0
            self.agents: dict[str, Agent_] = {}
            self.saved: dict[str, tuple[int, str]] = {}  # group → (generation, member)
            self.committed: dict[str, int] = {}

        def _now(self, t: float) -> datetime:
            return T0 + timedelta(seconds=t)

        @rule(
            name=st.sampled_from(AGENTS),
            offset_s=st.floats(-100, 100),
            # Clocks may run fast or slow as long as the margin covers it:
            # (ttl - margin) / rate <= ttl.
            rate=st.floats(0.8, 1.25),
        )
        def start(self, name, offset_s, rate):
            if name not in self.agents or not self.agents[name].alive:
                self.agents[name] = Agent_(name, offset_s, rate)

        def _exchange(self, agent: Agent_, delay: float, **parts):
            sent = agent.local(self.t)
            self.t += delay  # the request's way to the database
            answer = group_leases_exchange(
                cluster_id=cluster.pk,
                agent_id=agent.name,
                ttl_ms=TTL_MS,
                acquire=parts.get("acquire", []),
                renew=parts.get("renew", []),
                release=[],
                now=self._now(self.t),
            )
            return sent, answer

        @rule(name=st.sampled_from(AGENTS), group=st.sampled_from(GROUPS), delay=st.floats(0, 3))
        def acquire(self, name, group, delay):
            agent = self.agents.get(name)
            if agent is None or not agent.alive or agent.believes(group, self.t):
                return
            sent, answer = self._exchange(agent, delay, acquire=[group])
            lease = answer["leases"][0]
            if lease["agent_id"] == name:
                agent.leases[group] = (lease["epoch"], sent + (TTL_MS - MARGIN_MS) / 1000)

        @rule(name=st.sampled_from(AGENTS), delay=st.floats(0, 3))
        def renew(self, name, delay):
            agent = self.agents.get(name)
            if agent is None or not agent.alive:
                return
            held = {g: e for g in GROUPS if (e := agent.believes(g, self.t))}
            if not held:
                return
            sent, answer = self._exchange(agent, delay, renew=list(held.items()))
            for group in answer["renewed"]:
                agent.leases[group] = (held[group], sent + (TTL_MS - MARGIN_MS) / 1000)
            for group in answer["lost"]:
                agent.leases.pop(group, None)

        @rule(dt=st.floats(0, 5))
        def time_passes(self, dt):
            self.t += dt

        @rule(name=st.sampled_from(AGENTS))
        def dies(self, name):
            if name in self.agents:
                self.agents[name].alive = False

        @rule(
            name=st.sampled_from(AGENTS),
            group=st.sampled_from(GROUPS),
            generation=st.integers(1, 5),
            heeds_its_clock=st.booleans(),
        )
        def saves(self, name, group, generation, heeds_its_clock):
            """A holder saves its group; one that ignores its clock (paused, buggy) writes
            with whatever epoch it last had."""
            agent = self.agents.get(name)
            held = agent and agent.leases.get(group)
            if not held or (heeds_its_clock and not agent.believes(group, self.t)):
                return
            epoch = held[0]
            error = group_state_save(
                cluster_id=cluster.pk,
                agent_id=name,
                group_id=group,
                epoch=epoch,
                state={
                    "generation": generation,
                    "protocol_type": "consumer",
                    "protocol_name": "range",
                    "leader": f"{name}-m",
                    "members": [member(f"{name}-m")],
                },
                now=self._now(self.t),
            )
            row = GroupLease.objects.get(cluster=cluster, group_id=group)
            live = row.expires_at > self._now(self.t)
            current = row.agent_id == name and row.epoch == epoch and live
            assert (error == E.NONE) == current
            if agent.believes(group, self.t):
                assert error == E.NONE, "a holder within its deadline is never refused"
            if error == E.NONE:
                self.saved[group] = (generation, f"{name}-m")

        @rule(
            name=st.sampled_from(AGENTS),
            group=st.sampled_from(GROUPS),
            stale_generation=st.booleans(),
            offset=st.integers(0, 1000),
        )
        def commits(self, name, group, stale_generation, offset):
            agent = self.agents.get(name)
            held = agent and agent.leases.get(group)
            if not held or group not in self.saved:
                return
            generation, member_id = self.saved[group]
            asked = generation - 1 if stale_generation else generation
            with transaction.atomic():
                answer = group_offsets_commit(
                    cluster,
                    group,
                    [{"topic": partition_topic, "partition": 0, "offset": offset}],
                    agent_id=name,
                    epoch=held[0],
                    generation=asked,
                    member_id=member_id,
                    now=self._now(self.t),
                )
            row = GroupLease.objects.get(cluster=cluster, group_id=group)
            current = (
                row.agent_id == name and row.epoch == held[0] and row.expires_at > self._now(self.t)
            )
            error = answer["offsets"][0]["error_code"]
            if not current:
                assert error == E.NOT_COORDINATOR
            elif row.generation != asked or row.members[0]["member_id"] != member_id:
                assert error in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID)
            else:
                assert error == E.NONE
                self.committed[group] = offset
            stored = GroupOffset.objects.filter(cluster=cluster, group_id=group).first()
            assert (stored.committed_offset if stored else None) == self.committed.get(group)

        @invariant()
        def at_most_one_believer_per_group(self):
            for group in GROUPS:
                believers = [a.name for a in self.agents.values() if a.believes(group, self.t)]
                assert len(believers) <= 1, (group, believers)
                if believers:
                    row = GroupLease.objects.get(cluster=cluster, group_id=group)
                    assert row.agent_id == believers[0]
                    assert row.expires_at > self._now(self.t)

    return Ownership


def test_the_ownership_rule_against_a_model(agent_api, alice):
    from hypothesis.stateful import run_state_machine_as_test

    register(alice["cluster"], *AGENTS)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    agent_api.create_topic(topic)
    run_state_machine_as_test(
        _machine(alice["cluster"], topic),
        settings=settings(
            max_examples=60,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
