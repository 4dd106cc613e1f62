"""The server-side assignors of KIP-848 consumer groups (`group.remote.assignor`).

Each takes the members' subscriptions ({member id: subscribed topic ids}), the topics'
partition counts ({topic id: partitions}) and the previous target assignment, and returns
the new target ({member id: partitions}). Pure functions: the group's reconciliation
(`agents.groups.consumer_state`) moves members towards the target one heartbeat at a
time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

TopicPartition = tuple[str, int]  # (topic id as text, partition)

ASSIGNORS = ("uniform", "range")  # the first is the default


def _all_partitions(topic_ids: Iterable[str], partitions: dict[str, int]) -> list[TopicPartition]:
    return [(t, p) for t in sorted(topic_ids) for p in range(partitions.get(t, 0))]


def uniform_assign(
    subscriptions: dict[str, set[str]],
    partitions: dict[str, int],
    previous: dict[str, set[TopicPartition]],
) -> dict[str, set[TopicPartition]]:
    """Kafka's `uniform`: every subscribed partition to one member, counts as even as the
    subscriptions allow, and members keep what they had where that stays even."""
    members = sorted(subscriptions)
    target: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members:
        return target
    wanted = _all_partitions(set().union(*subscriptions.values()), partitions)
    eligible = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in wanted}
    cap = math.ceil(len(wanted) / len(members)) if wanted else 0
    taken: set[TopicPartition] = set()
    for m in members:  # stickiness: keep previous partitions up to the cap
        for tp in sorted(previous.get(m, ())):
            if len(target[m]) >= cap:
                break
            if tp in eligible and m in eligible[tp] and tp not in taken:
                target[m].add(tp)
                taken.add(tp)
    for tp in wanted:
        if tp not in taken:
            chosen = min(eligible[tp], key=lambda m: (len(target[m]), m))
            target[chosen].add(tp)
    # Even out: move a partition from a member with two more than an eligible other.
    moved = True
    while moved:
        moved = False
        for m in sorted(members, key=lambda m: -len(target[m])):
            for tp in sorted(target[m]):
                poorer = min(eligible[tp], key=lambda o: (len(target[o]), o))
                if len(target[poorer]) + 1 < len(target[m]):
                    target[m].discard(tp)
                    target[poorer].add(tp)
                    moved = True
                    break
            if moved:
                break
    return target


def range_assign(
    subscriptions: dict[str, set[str]],
    partitions: dict[str, int],
    previous: dict[str, set[TopicPartition]],
) -> dict[str, set[TopicPartition]]:
    """Kafka's `range`: each topic's partitions in contiguous ranges over the members
    subscribing to it, in member id order (co-partitioned topics line up)."""
    target: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic_id in sorted(set().union(*subscriptions.values()) if subscriptions else ()):
        members = sorted(m for m, topics in subscriptions.items() if topic_id in topics)
        count = partitions.get(topic_id, 0)
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            target[m].update((topic_id, p) for p in range(start, start + n))
            start += n
    return target
