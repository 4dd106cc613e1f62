"""Put the archived WAL a restored base backup needs into its pg_wal/, so the node can
start as a streaming standby with no `restore_command`.

Called by replica_from_backup.sh after `barman-cloud-restore`, with the restored data
folder; the bucket comes from the same environment (FLOE_BACKUP_URL, FLOE_BACKUP_SERVER,
FLOE_BACKUP_ENDPOINT). Run by barman's own Python (it uses barman-cloud's S3 client and
its WAL downloader, which knows the archive's layout and compressions).

Why not a `restore_command`: Patroni gives every standby the same recovery settings, and a
standby with a `restore_command` asks the archive, on promotion, for the timeline history
files and the next WAL segment several times — a process start each (1-3 s for
barman-cloud) inside a switchover's pause. A streaming standby needs no archive (Patroni's
replication slots keep on the primary what each standby still needs); only a node rebuilt
from a backup does, once, and this gives it that WAL: every history file and every
archived segment from the backup's start on, listed again until a pass finds nothing new.
The WAL written after the last archived segment is still on the primary (PostgreSQL keeps
a segment until it is archived), and the standby streams it from there.

    python fetch_archived_wal.py DATADIR
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import closing
from pathlib import Path

from barman import xlog
from barman.clients.cloud_walrestore import parse_arguments
from barman.cloud import ALLOWED_COMPRESSIONS, CloudWalDownloader
from barman.cloud_providers import get_cloud_interface

PASSES = 5  # listings at most: each fetches what was archived during the one before


def backup_start(datadir: Path) -> tuple[int, str]:
    """The restored backup's first timeline and first WAL segment (its backup_label)."""
    label = (datadir / "backup_label").read_text()
    segment = re.search(r"^START WAL LOCATION: .* \(file ([0-9A-F]{24})\)", label, re.M)
    timeline = re.search(r"^START TIMELINE: (\d+)", label, re.M)
    if segment is None or timeline is None:
        raise SystemExit(f"fetch_archived_wal: no start WAL in {datadir / 'backup_label'}")
    return int(timeline.group(1)), segment.group(1)


def wanted(name: str, timeline: int, first: str) -> bool:
    """Every history file; a whole segment of the backup's timeline or a later one, at or
    after the backup's first segment (a timeline abandoned earlier is never replayed)."""
    if xlog.is_history_file(name):
        return True
    if not xlog.is_wal_file(name) or xlog.is_partial_file(name) or xlog.is_backup_file(name):
        return False
    return int(name[:8], 16) >= timeline and name[8:] >= first[8:]


def plain(path: str) -> str:
    name = os.path.basename(path)
    for suffix in ALLOWED_COMPRESSIONS:
        name = name.removesuffix(suffix)
    return name


def main(argv: list[str]) -> int:
    datadir = Path(argv[0])
    pg_wal = datadir / "pg_wal"
    timeline, first = backup_start(datadir)
    options = ["--cloud-provider", "aws-s3"]
    if os.environ.get("FLOE_BACKUP_ENDPOINT"):
        options += ["--endpoint-url", os.environ["FLOE_BACKUP_ENDPOINT"]]
    server = os.environ["FLOE_BACKUP_SERVER"]
    config = parse_arguments([*options, os.environ["FLOE_BACKUP_URL"], server, first, "-"])
    fetched: set[str] = set()
    with closing(get_cloud_interface(config)) as cloud:
        downloader = CloudWalDownloader(cloud_interface=cloud, server_name=server)
        prefix = f"{cloud.path}/{server}/wals/".lstrip("/")
        for _ in range(PASSES):
            names = {plain(path) for path in cloud.list_bucket(prefix, delimiter="")}
            new = sorted(n for n in names - fetched if wanted(n, timeline, first))
            if not new:
                break
            for name in new:  # in this thread: barman re-raises a failure only in the main one
                downloader.download_wal(name, str(pg_wal / name), True, 1)
                fetched.add(name)
    segments = sum(1 for name in fetched if not xlog.is_history_file(name))
    print(f"fetch_archived_wal: {segments} archived WAL segments and "
          f"{len(fetched) - segments} history files into {pg_wal} (from {first})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
