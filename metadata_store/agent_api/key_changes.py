"""Agent keys that stop working reach every web process's key cache at once.

``endpoint`` caches which cluster a key names for 5 s. A cluster's deletion and an agent
key's revocation send a PostgreSQL notification in their own transaction (delivered when
it commits); each web server listens on one connection of its own and drops the cluster's
keys from its cache when one arrives. While the listener is not connected (the database
restarted) it reconnects every second and empties the whole cache on each connect, so a
notification missed meanwhile costs at most the cache's 5 s, as before.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg
from django.db import connection
from django.db.models.signals import post_delete, post_save

from metadata_store.agent_api import endpoint
from metadata_store.clusters import AgentKey, VirtualCluster

log = logging.getLogger(__name__)

CHANNEL = "floe_agent_keys"
RECONNECT_S = 1.0
CONNECT_TIMEOUT_S = 5


def _notify(cluster_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(cluster_id)])


def _cluster_deleted(sender: object, instance: VirtualCluster, **kwargs: object) -> None:
    _notify(instance.pk)


def _key_saved(sender: object, instance: AgentKey, **kwargs: object) -> None:
    if instance.revoked_at is not None:
        _notify(instance.cluster_id)


def connect() -> None:
    """Send the notifications (from the app's ``ready``)."""
    post_delete.connect(_cluster_deleted, sender=VirtualCluster, dispatch_uid="floe-key-changes")
    post_save.connect(_key_saved, sender=AgentKey, dispatch_uid="floe-key-changes")


async def listen(conninfo: str) -> None:
    """Forget the keys of every cluster a notification names, until cancelled."""
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(
                conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                endpoint.forget_cluster(None)  # whatever changed while nobody listened
                async for note in conn.notifies():
                    payload = note.payload
                    endpoint.forget_cluster(int(payload) if payload.isdigit() else None)
        except (psycopg.Error, OSError) as exc:
            log.warning("agent key notifications: %s; listening again in %.0f s", exc, RECONNECT_S)
        await asyncio.sleep(RECONNECT_S)
