"""The jobs role: lease the cluster's queued job runs from the control plane, run each
step's Spark job (`jobs/`) against this agent's own bucket with its own credentials,
renew the lease with progress while Spark works, and report the result.

The control plane plans and applies (compare-and-swap); this side only runs Spark and
deletes what it wrote when the control plane says nothing will reference it — or when
the lease was lost and the result is refused (docs/AGENT_API.md "jobs/…").
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError, ControlPlaneRejected
from agents.metrics import Counter
from core.storage import ObjectStore

log = logging.getLogger(__name__)

REPORT_ATTEMPTS = 5
_STEPS = Counter(
    "floe_job_steps_total", "Spark job steps run for the cluster, by outcome.", ("outcome",)
)


_TABLE_RECORDS = Counter(
    "floe_table_appended_records_total", "Records the table_append job added to topic tables."
)
_TABLE_BYTES = Counter(
    "floe_table_appended_bytes_total", "Parquet bytes the table_append job added to topic tables."
)
_TABLE_DEAD = Counter(
    "floe_table_dead_letters_total",
    "Records whose value did not decode, appended to their table's dead-letter table.",
)
_TABLE_CONFLICTS = Counter(
    "floe_table_commit_conflicts_total",
    "Topic-table commits that lost a race to another writer and were redone.",
)


def _count_table_append(result: dict[str, Any] | None) -> None:
    for table in (result or {}).get("tables") or []:
        if isinstance(table, dict):
            _TABLE_RECORDS.inc(float(table.get("appended") or 0))
            _TABLE_BYTES.inc(float(table.get("bytes") or 0))
            _TABLE_CONFLICTS.inc(float(table.get("conflicts") or 0))
            _TABLE_DEAD.inc(float(table.get("dead") or 0))


def _bytes_total(step: dict[str, Any]) -> int:
    """The bytes a step reads, when its plan says (compaction's batches carry lengths)."""
    batches = step.get("plan", {}).get("batches") or []
    try:
        return sum(int(b[7]) for b in batches)
    except (TypeError, ValueError, IndexError):
        return 0


def _outputs(step: dict[str, Any], result: dict[str, Any] | None) -> list[str]:
    """What the step wrote: its result's files, under the output prefix its plan gave."""
    prefix = step.get("plan", {}).get("output_prefix")
    if not isinstance(prefix, str) or not prefix:
        return []
    files = (result or {}).get("files") or []
    keys = [f.get("key") for f in files if isinstance(f, dict)]
    return [k for k in keys if isinstance(k, str) and k.startswith(prefix) and ".." not in k]


class JobRunner:
    """`await runner.run_forever()`: one run at a time, one Spark session per process."""

    def __init__(
        self,
        client: ControlPlaneClient,
        store: ObjectStore,
        *,
        agent_id: str,
        bucket_url: str,
        spark_master: str = "",
        lease_s: int = 120,
        poll_s: float = 1.0,
    ) -> None:
        self.client = client
        self.store = store
        self.agent_id = agent_id
        self.bucket_url = bucket_url
        self.spark_master = spark_master or None
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._spark = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floe-spark")

    def close(self) -> None:
        self._spark.shutdown(wait=False, cancel_futures=True)

    async def run_forever(self) -> None:
        while True:
            try:
                answer = await self.client.call(
                    "jobs/lease", {"agent_id": self.agent_id, "lease_s": self.lease_s}, timeout_s=60
                )
            except ControlPlaneError as exc:
                log.warning("jobs/lease failed: %s", exc)
                answer = {}
            run = answer.get("run")
            if not run:
                await asyncio.sleep(self.poll_s)
                continue
            try:
                await self.execute(run)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("job run %s: the runner failed", run.get("id"))

    def _run_step(self, step: dict[str, Any]) -> dict[str, Any]:
        from jobs.runner import run_job  # pyspark: only agents with the jobs role load it

        plan = {**step["plan"], "bucket_url": self.bucket_url}
        if isinstance(plan.get("catalog_path"), str):
            # The cluster's Iceberg catalog, reached with this agent's own key.
            plan["catalog_url"] = self.client.root_url + plan["catalog_path"]
            plan["catalog_token"] = self.client.agent_key
        return run_job(step["job"], plan, mode="inprocess", master=self.spark_master)

    async def execute(self, run: dict[str, Any]) -> None:
        """Run every step of a leased run, reporting each."""
        loop = asyncio.get_running_loop()
        step: dict[str, Any] | None = run["step"]
        log.info("job run %s (%s): leased, attempt %s", run["id"], run["kind"], run.get("attempt"))
        while step is not None:
            renewing = loop.create_task(self._renew(run, step))
            result: dict[str, Any] | None = None
            error = ""
            try:
                result = await loop.run_in_executor(self._spark, self._run_step, step)
                _STEPS.inc(1, "ok")
                if step["job"] == "table_append":
                    _count_table_append(result)
            except Exception as exc:
                log.exception("job run %s: step %s failed", run["id"], step["job"])
                error = f"{type(exc).__name__}: {exc}"
                _STEPS.inc(1, "failed")
            finally:
                renewing.cancel()
            answer = await self._report(run, result, error)
            if answer is None:
                await self._discard(run, _outputs(step, result))
                return
            await self._discard(run, list(answer.get("discard") or []))
            step = answer.get("step")
        log.info("job run %s (%s): done", run["id"], run["kind"])

    async def _report(
        self, run: dict[str, Any], result: dict[str, Any] | None, error: str
    ) -> dict[str, Any] | None:
        """The control plane's answer, or None when it refused the result (the lease
        was lost) or could not be reached while the lease lasted."""
        body = {
            "run_id": run["id"],
            "lease": run["lease"],
            "lease_s": self.lease_s,
            "result": result,
            "error": error[:10_000],
        }
        delay = 1.0
        for attempt in range(REPORT_ATTEMPTS):
            try:
                return await self.client.call("jobs/report", body, timeout_s=300)
            except ControlPlaneRejected as exc:
                log.warning("job run %s: result refused: %s", run["id"], exc)
                return None
            except ControlPlaneError as exc:
                if attempt == REPORT_ATTEMPTS - 1:
                    log.error("job run %s: cannot report: %s", run["id"], exc)
                    return None
                await asyncio.sleep(delay)
                delay *= 2
        return None

    async def _renew(self, run: dict[str, Any], step: dict[str, Any]) -> None:
        """Heartbeat the lease while Spark works, with how far it is."""
        from jobs.session import active_fraction

        total = _bytes_total(step)
        interval = max(1.0, min(self.lease_s / 3, 10.0))
        while True:
            fraction = active_fraction() or 0.0
            progress = {"stage": step.get("stage") or step["job"], "bytes_total": total}
            progress["bytes_done"] = int(total * fraction)
            try:
                await self.client.call(
                    "jobs/heartbeat",
                    {
                        "run_id": run["id"],
                        "lease": run["lease"],
                        "lease_s": self.lease_s,
                        "progress": progress,
                    },
                    timeout_s=10,
                )
            except ControlPlaneRejected as exc:
                log.warning("job run %s: lease lost: %s", run["id"], exc)
                return
            except ControlPlaneError as exc:
                log.warning("job run %s: lease heartbeat failed: %s", run["id"], exc)
            await asyncio.sleep(interval)

    async def _discard(self, run: dict[str, Any], keys: list[str]) -> None:
        """Delete objects nothing will reference (outputs of a refused or conflicting
        result); the orphan cleaner is the backstop if this fails."""
        if not keys:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.store.delete_many, keys)
            log.info("job run %s: deleted %d unused outputs", run["id"], len(keys))
        except Exception:
            log.exception("job run %s: could not delete %d outputs", run["id"], len(keys))
