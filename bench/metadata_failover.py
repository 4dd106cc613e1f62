"""How long the replicated metadata PostgreSQL stops taking commits in a planned
switchover (and, with `--kills`, when its primary is SIGKILLed), seen by a client.

Starts `tests/ha/cluster.py`'s cluster (three Patroni nodes, synchronous replication, WAL
archived to a moto S3 bucket) and a client that commits a row every 20 ms through the
multi-host DSN (`target_session_attrs=read-write`, a new connection after each failure,
as Floe's processes reconnect); then `--switchovers` switchovers one after another (and
`--kills` kills, the node started again after each). For each: the longest gap between
two of the client's commits (the pause a producer's commits would see, Floe's own part
not included), and how long the command took. Prints one JSON line per event, then a
summary (min/median/max).

    .venv/bin/python bench/metadata_failover.py [--switchovers 3] [--kills 0]
        [--standby-restore-command] [--no-failure-detector]

`--standby-restore-command` gives the standbys barman-cloud's `restore_command` too (the
shape before: a promotion then asks the archive for timeline history files and WAL).
`--no-failure-detector` runs no deploy/ha/failure_detector.py beside the nodes: a killed
primary is then replaced only when its leader key's ttl runs out.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import threading
import time

from common import ROOT

sys.path.insert(0, str(ROOT))

COMMIT_EVERY_S = 0.02


class Committer:
    """A row committed every 20 ms in a thread; `commits` holds each one's time."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.commits: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        conn = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(self.dsn, connect_timeout=2, autocommit=True)
                    conn.execute("SET statement_timeout = '5s'")
                    conn.execute("CREATE TABLE IF NOT EXISTS bench_commits (at float8)")
                conn.execute("INSERT INTO bench_commits VALUES (%s)", [time.time()])
                self.commits.append(time.monotonic())
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(COMMIT_EVERY_S)

    def longest_pause(self, since: float) -> float:
        """The longest gap between two commits, counting those after `since`."""
        times = list(self.commits)
        return max((b - a for a, b in zip(times, times[1:]) if b > since), default=0.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switchovers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=0)
    parser.add_argument("--standby-restore-command", action="store_true")
    parser.add_argument("--no-failure-detector", action="store_true")
    args = parser.parse_args()
    from tests.ha.cluster import ha_cluster

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    events: dict[str, list[dict]] = {"switchover": [], "kill": []}
    with ha_cluster(
        standby_restore_command=args.standby_restore_command,
        failure_detector=not args.no_failure_detector,
    ) as cluster:
        committer = Committer(cluster.dsn)
        try:
            for kind, count in (("switchover", args.switchovers), ("kill", args.kills)):
                for _ in range(count):
                    try:
                        cluster.wait_healthy(180)
                    except TimeoutError:  # e.g. standbys left in archive recovery
                        print(json.dumps({"event": kind, "error": "not healthy in 180 s"}))
                        break
                    time.sleep(3)  # the committer's steady state before the event
                    started = time.monotonic()
                    if kind == "switchover":
                        cluster.switchover()
                    else:
                        killed = cluster.kill_primary()
                        cluster.wait_primary(90, other_than=killed)
                    command_s = time.monotonic() - started
                    time.sleep(3)  # commits resumed: the pause is over
                    row = {"event": kind, "longest_pause_s": round(committer.longest_pause(started), 2),
                           "command_s": round(command_s, 2)}  # fmt: skip
                    events[kind].append(row)
                    print(json.dumps(row), flush=True)
                    if kind == "kill":
                        cluster.start_node(killed)  # its machine is back: it rejoins
        finally:
            committer.stop()
    summary = {
        "standby_restore_command": args.standby_restore_command,
        "failure_detector": not args.no_failure_detector,
        **{
            kind: {
                "runs": len(rows),
                "longest_pause_s": {
                    "min": min(r["longest_pause_s"] for r in rows),
                    "median": statistics.median(r["longest_pause_s"] for r in rows),
                    "max": max(r["longest_pause_s"] for r in rows),
                },
            }
            for kind, rows in events.items()
            if rows
        },
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
