"""Transactions (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
DescribeTransactions and ListTransactions.

The coordinator's state is in the metadata store (``metadata_store/transactions.py``),
so every agent is a transaction coordinator (FindCoordinator key type 1 hashes over the
live agents only to spread the load) and each request is one control-plane call.
"""

from __future__ import annotations

import time
from typing import Any

from agents.context import AgentContext
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.offset_metadata import metadata_fields

# Kafka's names of the coordinator's states (TransactionState), from the store's.
_STATE_NAMES = {
    "empty": "Empty",
    "ongoing": "Ongoing",
    "complete_commit": "CompleteCommit",
    "complete_abort": "CompleteAbort",
}
_KNOWN_STATES = set(_STATE_NAMES.values()) | {
    "PrepareCommit",
    "PrepareAbort",
    "Dead",
    "PrepareEpochFence",
}


def fenced_error(error: int, header: RequestHeader, since: int) -> int:
    """PRODUCER_FENCED exists for the API from version `since` (KIP-588); older clients
    learn the same thing as INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and header.api_version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


async def _add_partitions(
    ctx: AgentContext,
    header: RequestHeader,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    topics: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    answer = await ctx.client.call(
        "txn/add-partitions",
        {
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "partitions": [
                {"topic": t["name"], "partition": p} for t in topics for p in t["partitions"]
            ],
        },
    )
    errors = iter(answer["partitions"])
    return [
        {
            "name": t["name"],
            "results_by_partition": [
                {
                    "partition_index": p,
                    "partition_error_code": fenced_error(next(errors)["error_code"], header, 2),
                }
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


async def handle_add_partitions_to_txn(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka AddPartitionsToTxn: v0–3 one transaction (clients), v4+ several (KIP-890)."""
    if header.api_version <= 3:
        results = await _add_partitions(
            ctx,
            header,
            body["v3_and_below_transactional_id"],
            body["v3_and_below_producer_id"],
            body["v3_and_below_producer_epoch"],
            body["v3_and_below_topics"],
        )
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    by_transaction = []
    for txn in body["transactions"]:
        if txn.get("verify_only"):
            answer = await ctx.client.call(
                "txn/add-partitions",
                {
                    "transactional_id": txn["transactional_id"],
                    "producer_id": txn["producer_id"],
                    "producer_epoch": txn["producer_epoch"],
                    "partitions": [
                        {"topic": t["name"], "partition": p}
                        for t in txn["topics"]
                        for p in t["partitions"]
                    ],
                    "verify_only": True,
                },
            )
            errors = iter(answer["partitions"])
            results = [
                {
                    "name": t["name"],
                    "results_by_partition": [
                        {"partition_index": p, "partition_error_code": next(errors)["error_code"]}
                        for p in t["partitions"]
                    ],
                }
                for t in txn["topics"]
            ]
        else:
            results = await _add_partitions(
                ctx,
                header,
                txn["transactional_id"],
                txn["producer_id"],
                txn["producer_epoch"],
                txn["topics"],
            )
        by_transaction.append(
            {"transactional_id": txn["transactional_id"], "topic_results": results}
        )
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": by_transaction}


async def handle_add_offsets_to_txn(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka AddOffsetsToTxn: the transaction will carry the group's offsets."""
    answer = await ctx.client.call(
        "txn/add-offsets",
        {
            "transactional_id": body["transactional_id"],
            "producer_id": body["producer_id"],
            "producer_epoch": body["producer_epoch"],
            "group_id": body["group_id"],
        },
    )
    return {"throttle_time_ms": 0, "error_code": fenced_error(answer["error_code"], header, 2)}


async def handle_txn_offset_commit(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka TxnOffsetCommit: offsets held by the transaction until it ends. Any agent
    answers it (the offsets are in the metadata store), coordinator of the group or not."""
    offsets = [
        {
            "topic": t["name"],
            "partition": p["partition_index"],
            "offset": p["committed_offset"],
            "leader_epoch": p.get("committed_leader_epoch", -1),
            **metadata_fields(p.get("committed_metadata")),
        }
        for t in body["topics"]
        for p in t["partitions"]
    ]
    answer = await ctx.client.call(
        "txn/offset-commit",
        {
            "transactional_id": body["transactional_id"],
            "producer_id": body["producer_id"],
            "producer_epoch": body["producer_epoch"],
            "group_id": body["group_id"],
            "offsets": offsets,
        },
    )
    errors = iter(answer["offsets"])
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        # TxnOffsetCommit never learned PRODUCER_FENCED.
                        "error_code": fenced_error(next(errors)["error_code"], header, 99),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ],
    }


async def handle_end_txn(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka EndTxn: commit or abort; markers and offsets are one metadata transaction."""
    answer = await ctx.client.call(
        "txn/end",
        {
            "transactional_id": body["transactional_id"],
            "producer_id": body["producer_id"],
            "producer_epoch": body["producer_epoch"],
            "committed": body["committed"],
        },
    )
    # The markers moved these partitions' high watermark and last stable offset: what
    # this agent learned of them is stale (ListOffsets right after commit_transaction
    # returns must see the transaction's records as stable, as Kafka's does).
    for moved in answer.get("partitions") or ():
        if isinstance(moved, dict) and isinstance(moved.get("partition"), int):
            ctx.offsets.forget(str(moved.get("topic_id")), moved["partition"])
    return {"throttle_time_ms": 0, "error_code": fenced_error(answer["error_code"], header, 2)}


def _by_topic(partitions: list[tuple[str, int]]) -> list[dict[str, Any]]:
    topics: dict[str, list[int]] = {}
    for name, index in partitions:
        topics.setdefault(name, []).append(index)
    return [{"topic": n, "partitions": sorted(p)} for n, p in sorted(topics.items())]


async def handle_describe_transactions(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeTransactions (KIP-664)."""
    ids = list(body["transactional_ids"])
    answer = await ctx.client.call("txn/describe", {"transactional_ids": ids})
    found = {t["transactional_id"]: t for t in answer["transactions"]}
    states = []
    for transactional_id in ids:
        txn = found.get(transactional_id)
        if txn is None:
            states.append(
                {
                    "error_code": ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                    "transactional_id": transactional_id,
                    "transaction_state": "",
                    "transaction_timeout_ms": 0,
                    "transaction_start_time_ms": -1,
                    "producer_id": -1,
                    "producer_epoch": -1,
                    "topics": [],
                }
            )
            continue
        states.append(
            {
                "error_code": 0,
                "transactional_id": transactional_id,
                "transaction_state": _STATE_NAMES.get(txn["state"], txn["state"]),
                "transaction_timeout_ms": txn["timeout_ms"],
                "transaction_start_time_ms": txn["start_time_ms"],
                "producer_id": txn["producer_id"],
                "producer_epoch": txn["producer_epoch"],
                "topics": _by_topic(txn["partitions"]),
            }
        )
    return {"throttle_time_ms": 0, "transaction_states": states}


async def handle_list_transactions(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka ListTransactions (KIP-664), with its state, producer id and (v1) duration
    filters."""
    answer = await ctx.client.call("txn/list", {})
    state_filter = set(body.get("state_filters") or [])
    pid_filter = set(body.get("producer_id_filters") or [])
    duration = body.get("duration_filter", -1)
    now_ms = int(time.time() * 1000)
    listed = []
    for txn in answer["transactions"]:
        state = _STATE_NAMES.get(txn["state"], txn["state"])
        if state_filter and state not in state_filter:
            continue
        if pid_filter and txn["producer_id"] not in pid_filter:
            continue
        if duration >= 0 and (txn["start_time_ms"] < 0 or now_ms - txn["start_time_ms"] < duration):
            continue
        listed.append(
            {
                "transactional_id": txn["transactional_id"],
                "producer_id": txn["producer_id"],
                "transaction_state": state,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "unknown_state_filters": sorted(state_filter - _KNOWN_STATES),
        "transaction_states": listed,
    }
