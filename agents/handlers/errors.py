"""Answers for requests that fail as a whole, and the exception that closes a connection.

The dispatcher (a handler raised, the control plane is down) and the ACL check (no rule
allows the call) both answer through `error_response`: every part of the request gets
the error, where the API has a place for one.
"""

from __future__ import annotations

from typing import Any

from agents.handlers import groups, produce, share, share_offsets, transactions
from core.kafka import ApiKey, RequestHeader


class CloseConnection(Exception):
    """The request cannot be answered; the connection must be closed (Kafka does).

    `final_response`, when given, is written before closing (a failed SASL login's answer).
    """

    def __init__(self, message: str, final_response: bytes | None = None) -> None:
        super().__init__(message)
        self.final_response = final_response


def error_response(header: RequestHeader, body: dict[str, Any], error: int) -> dict | None:
    """A response carrying `error` for every part of the request, where the API has one."""
    key = header.api_key
    if key in groups.GROUP_APIS:
        return groups.error_response(header, body, error)
    if key in share.SHARE_APIS:
        return share.error_response(header, body, error)
    if key in share_offsets.SHARE_OFFSET_APIS:
        return share_offsets.error_response(header, body, error)
    if key in transactions.TXN_APIS:
        return transactions.error_response(header, body, error)
    if key == ApiKey.PRODUCE:
        return produce.produce_error_response(body, error)
    if key == ApiKey.FETCH:
        return {"throttle_time_ms": 0, "error_code": error, "session_id": 0, "responses": []}
    if key == ApiKey.INIT_PRODUCER_ID:
        return {"error_code": error, "producer_id": -1, "producer_epoch": -1}
    if key == ApiKey.DESCRIBE_CLUSTER:
        return {"error_code": error, "cluster_id": "", "brokers": []}
    if key == ApiKey.LIST_OFFSETS:
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": error}
                        for p in t["partitions"]
                    ],
                }
                for t in body.get("topics") or []
            ]
        }
    if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        {"partition": p["partition"], "error_code": error} for p in t["partitions"]
                    ],
                }
                for t in body.get("topics") or []
            ]
        }
    if key == ApiKey.DELETE_RECORDS:
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": error}
                        for p in t["partitions"]
                    ],
                }
                for t in body.get("topics") or []
            ]
        }
    if key == ApiKey.CREATE_TOPICS:
        return {"topics": [{"name": t["name"], "error_code": error} for t in body["topics"]]}
    if key == ApiKey.DELETE_TOPICS:
        if header.api_version >= 6:
            items = [{"name": t["name"], "topic_id": t["topic_id"]} for t in body["topics"]]
        else:
            items = [{"name": name} for name in body["topic_names"]]
        return {"responses": [{**item, "error_code": error} for item in items]}
    if key == ApiKey.CREATE_PARTITIONS:
        return {"results": [{"name": t["name"], "error_code": error} for t in body["topics"]]}
    if key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        items = [
            {
                "error_code": error,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
            }
            for r in body["resources"]
        ]
        return {"results": items} if key == ApiKey.DESCRIBE_CONFIGS else {"responses": items}
    # Metadata has no top-level error code: a client would read an empty answer as
    # "no topics", so close instead and let it retry elsewhere.
    return None
