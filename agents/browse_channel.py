"""The agent's end of the browse channel: it long-polls the control plane for the
console's browse requests and answers each with what it reads: records of a partition,
or the stored documents of schemas (the console's Schemas page), or a pipeline's dry
run on the newest records of its input topics (`agents.pipeline_samples`).

The control plane never connects to an agent (docs/ARCHITECTURE.md, invariant 5): the
agent keeps one poll open (``browse/poll``, which the control plane holds up to 25 s and
answers with a request or none), reads the records (`agents.record_browser`) or the
schema texts (`agents.schema_registry.registry`) and posts them back (``browse/answer``). So browsing works where the agent's network lets
connections out and none in. Every call is bounded; when the control plane is away
(restarting, unreachable) the loop waits 0.5 s, doubling up to 5 s, and polls again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agents.control_plane import AgentKeyRejected, ControlPlaneClient, ControlPlaneError

log = logging.getLogger(__name__)

# The control plane holds a poll 25 s (FLOE_BROWSE_POLL_S): give it room to answer.
POLL_TIMEOUT_S = 40.0
# A person waits 5 s (FLOE_BROWSE_WAIT_S) for the page: read it in less.
BROWSE_TIMEOUT_S = 4.0
ANSWER_TIMEOUT_S = 5.0
# The control plane refuses a page larger than this (virtualclusters.browsing.agent_api).
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_IN_FLIGHT = 4
FIRST_RETRY_S, LAST_RETRY_S = 0.5, 5.0
# A control plane that answers polls at once (one under a WSGI server, which does not
# hold them) is polled at most this often.
MIN_EMPTY_POLL_S = 1.0


def page_within(page: dict[str, Any], max_bytes: int = MAX_PAGE_BYTES) -> dict[str, Any]:
    """`page` with its last records left out until its JSON fits `max_bytes`."""
    records = page["records"]
    size = len(json.dumps(page, separators=(",", ":")))
    while size > max_bytes and records:
        dropped = records.pop()
        size -= len(json.dumps(dropped, separators=(",", ":"))) + 1
    return page


class BrowseChannel:
    """`await channel.run_forever()`: poll, answer, poll again."""

    def __init__(
        self,
        client: ControlPlaneClient,
        *,
        agent_id: str,
        browse: Callable[..., Awaitable[dict[str, Any]]],
        schema_document: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
        pipeline_dry_run: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.client = client
        self.agent_id = agent_id
        self.browse = browse
        self.schema_document = schema_document
        self.pipeline_dry_run = pipeline_dry_run
        self._answering: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)

    async def run_forever(self) -> None:
        """Poll until cancelled (the agent stops); pages being read are dropped then."""
        try:
            await self._poll_forever()
        finally:
            for task in list(self._answering):
                task.cancel()

    async def _poll_forever(self) -> None:
        delay = FIRST_RETRY_S
        while True:
            started = time.monotonic()
            try:
                answer = await self.client.call(
                    "browse/poll", {"agent_id": self.agent_id}, timeout_s=POLL_TIMEOUT_S
                )
            except AgentKeyRejected as exc:
                log.warning("browse channel: %s", exc)
                await asyncio.sleep(LAST_RETRY_S)
                continue
            except ControlPlaneError as exc:
                if delay == FIRST_RETRY_S:
                    log.warning("browse channel: poll failed (%s); polling again", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, LAST_RETRY_S)
                continue
            if delay != FIRST_RETRY_S:
                log.info("browse channel: connected again")
            delay = FIRST_RETRY_S
            request = answer.get("request") if isinstance(answer, dict) else None
            if isinstance(request, dict):
                await self._slots.acquire()  # at most MAX_IN_FLIGHT pages read at once
                task = asyncio.get_running_loop().create_task(self._answer(request))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)
            elif (spent := time.monotonic() - started) < MIN_EMPTY_POLL_S:
                await asyncio.sleep(MIN_EMPTY_POLL_S - spent)

    async def _answer(self, request: dict[str, Any]) -> None:
        try:
            body = {"id": str(request.get("id", "")), "agent_id": self.agent_id}
            body.update(await self._read(request))
            await self.client.call("browse/answer", body, timeout_s=ANSWER_TIMEOUT_S)
        except ControlPlaneError as exc:
            log.warning("browse channel: answering %s failed: %s", request.get("id"), exc)
        finally:
            self._slots.release()

    async def _read(self, request: dict[str, Any]) -> dict[str, Any]:
        """``{"page": …}`` or ``{"error", "not_found"}``: what to answer `request` (by its
        ``kind``: records when it has none, ``schema_texts``)."""
        kind = request.get("kind")
        if kind == "schema_texts":
            return await self._read_schema_texts(request)
        if kind == "pipeline_dry_run" and self.pipeline_dry_run is not None:
            return await self._pipeline_dry_run(self.pipeline_dry_run, request)
        if kind is not None:
            return {"error": f"this agent reads no {str(kind)[:100]!r}"}
        try:
            asked = {
                "topic": str(request["topic"]),
                "partition": int(request["partition"]),
                "limit": int(request["limit"]),
                **{
                    name: None if request.get(name) is None else int(request[name])
                    for name in ("offset", "timestamp")
                },
            }
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": f"bad browse request: {type(exc).__name__}: {exc}"[:1000]}
        try:
            page = await asyncio.wait_for(self.browse(**asked), BROWSE_TIMEOUT_S)
        except LookupError as exc:  # BrowseError: no such topic or partition
            return {"error": str(exc)[:1000], "not_found": True}
        except TimeoutError:
            return {"error": f"reading the records took longer than {BROWSE_TIMEOUT_S:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - the bucket, the control plane: say so
            log.warning("browse channel: reading records failed", exc_info=True)
            return {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        return {"page": page_within(page)}

    async def _pipeline_dry_run(
        self,
        run: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
        request: dict[str, Any],
    ) -> dict[str, Any]:
        """A pipeline's configuration run on the newest records of its input topics
        (`agents.pipeline_samples`): the engine's result is the page."""
        try:
            result = await asyncio.wait_for(run(request), BROWSE_TIMEOUT_S)
        except LookupError as exc:  # BrowseError: no such topic
            return {"error": str(exc)[:1000], "not_found": True}
        except TimeoutError:
            return {"error": f"the dry run took longer than {BROWSE_TIMEOUT_S:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - a bad request, the bucket: say so
            log.warning("browse channel: a pipeline dry run failed", exc_info=True)
            return {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        return {"page": page_within(result)}

    async def _read_schema_texts(self, request: dict[str, Any]) -> dict[str, Any]:
        """The stored documents of the fingerprints asked (the console's Schemas page)."""
        fingerprints = request.get("fingerprints")
        if not isinstance(fingerprints, list) or not all(isinstance(f, str) for f in fingerprints):
            return {"error": "bad schema_texts request: fingerprints must be a list of strings"}
        if self.schema_document is None:
            return {"error": "this agent reads no schema texts"}
        try:
            read = [self.schema_document(f) for f in fingerprints]
            documents = await asyncio.wait_for(asyncio.gather(*read), BROWSE_TIMEOUT_S)
        except TimeoutError:
            return {"error": f"reading the schema texts took longer than {BROWSE_TIMEOUT_S:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - a text missing, the bucket: say so
            log.warning("browse channel: reading schema texts failed", exc_info=True)
            return {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        return {"page": {"texts": dict(zip(fingerprints, documents, strict=True))}}
