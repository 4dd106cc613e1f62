"""Celery tasks of the metadata store. Thin: one service each.

beat ─ transactions_expire()   (every FLOE_TXN_TIMEOUT_CHECK_S, 10 s by default)
beat ─ txn_markers_prune()     (hourly)
"""

from __future__ import annotations

from celery import shared_task

from metadata_store import transactions


@shared_task(ignore_result=True)
def transactions_expire() -> int:
    """Abort the transactions open past their timeout (KIP-98), fencing their producers."""
    return transactions.txn_abort_expired()


@shared_task(ignore_result=True)
def txn_markers_prune() -> int:
    """Forget markers below their partitions' log start offsets (retention moved past)."""
    return transactions.txn_markers_prune()
