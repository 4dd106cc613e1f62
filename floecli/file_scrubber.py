"""``floe file-scrubber``: the objects of the cluster's bucket folder that no file of the
metadata store names (orphans: a PUT whose commit never happened, a job's abandoned
output), reported once older than the grace period; deleted only with ``--delete``.

Only segment objects (``.seg``) are judged, as the orphan cleaner does. The store's
files come in keyset pages of 1000 from the control plane *before* the bucket is listed:
an object written after that is younger than the grace period, so a commit racing the
scan never makes a live file look like an old orphan."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from core.storage import StorageError, open_store
from floecli.errors import BadInput, CommandFailed
from floecli.rest import add_rest_arguments, cluster_bucket, cluster_path, get_json, rest_target

COLUMNS = ("KEY", "BYTES", "AGE-S")
SEGMENT_SUFFIX = ".seg"  # objects of another kind are not the scrubber's to judge


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "file-scrubber",
        help="list the bucket's files that no committed run references (orphans)",
        description="Lists the cluster's folder of its bucket (--bucket, default the "
        "cluster's) and reports the objects no file of the metadata store names that are "
        "older than the grace period (default: the cluster's orphan grace). Never deletes "
        "unless --delete, which asks for confirmation (or --yes) and deletes only those.",
    )
    add_rest_arguments(parser)
    parser.add_argument(
        "--bucket",
        metavar="URL",
        help="the bucket (file:///abs/dir or s3://bucket/prefix?endpoint=…); default: the "
        "cluster's bucket URL",
    )
    parser.add_argument(
        "--grace-s",
        type=float,
        metavar="SECONDS",
        help="report objects older than this (default: the cluster's orphan grace)",
    )
    parser.add_argument("--delete", action="store_true", help="delete the orphans reported")
    parser.add_argument("--yes", action="store_true", help="with --delete: do not ask")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="bound on each call to the control plane (default 10)",
    )
    parser.set_defaults(run=scrub)


def known_files(args: argparse.Namespace) -> tuple[set[str], dict[str, Any]]:
    """Every key the store knows, and the first page's scan facts (prefix, spared
    prefixes, orphan grace)."""
    url, cluster, key = rest_target(args)
    keys: set[str] = set()
    after, facts = "", None
    while True:
        page, _ = get_json(
            url,
            cluster_path(cluster, f"files/?after={quote(after, safe='')}" if after else "files/"),
            key,
            args.request_timeout,
        )
        facts = facts or page
        keys.update(f["key"] for f in page["files"])
        if not page["next_after"]:
            return keys, facts
        after = page["next_after"]


def scrub(args: argparse.Namespace) -> int:
    if args.grace_s is not None and args.grace_s < 0:
        raise BadInput("--grace-s must not be negative")
    if args.yes and not args.delete:
        raise BadInput("--yes goes with --delete")
    known, facts = known_files(args)  # before the listing: see the module's docstring
    bucket = cluster_bucket(args, args.request_timeout)
    grace_s = facts["orphan_grace_s"] if args.grace_s is None else args.grace_s
    spared = tuple(facts["spared_prefixes"])
    now = datetime.now(UTC)
    listed = young = not_segments = 0
    orphans: list[dict[str, Any]] = []
    try:
        store = open_store(bucket)
        for obj in store.list(facts["prefix"]):
            listed += 1
            # The orphan cleaner's rule (jobs/orphan_cleanup.py): segment objects only.
            if not obj.key.endswith(SEGMENT_SUFFIX):
                not_segments += 1
                continue
            if obj.key in known or obj.key.startswith(spared):
                continue
            age_s = (now - obj.last_modified).total_seconds()
            if age_s <= grace_s:
                young += 1
                continue
            orphans.append(
                {
                    "key": obj.key,
                    "size": obj.size,
                    "last_modified": obj.last_modified.isoformat(),
                    "age_s": int(age_s),
                }
            )
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except StorageError as exc:
        raise CommandFailed(f"cannot list {bucket}: {exc}") from None
    doc = {
        "bucket": bucket,
        "prefix": facts["prefix"],
        "grace_s": grace_s,
        "listed": listed,
        "known_files": len(known),
        "unknown_within_grace": young,
        "not_segments": not_segments,
        "orphans": orphans,
        "orphan_bytes": sum(o["size"] for o in orphans),
        "deleted": [],
    }
    if args.delete and orphans:
        if not args.yes:
            sys.stderr.write(
                f"delete {len(orphans)} orphans ({doc['orphan_bytes']} bytes) older than "
                f"{grace_s:g}s from {bucket}? [y/N] "
            )
            sys.stderr.flush()
            if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                raise CommandFailed("not confirmed: nothing deleted")
        for orphan in orphans:
            try:
                store.delete(orphan["key"])
            except StorageError as exc:
                raise CommandFailed(
                    f"deleted {len(doc['deleted'])} of {len(orphans)}, then {orphan['key']}: {exc}"
                ) from None
            doc["deleted"].append(orphan["key"])
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    table = [COLUMNS] + [(o["key"], str(o["size"]), str(o["age_s"])) for o in orphans]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    print(
        f"{len(orphans)} orphans ({doc['orphan_bytes']} bytes) older than {grace_s:g}s of "
        f"{listed} objects under {facts['prefix']} ({len(known)} files known, {young} "
        f"unknown within the grace period, {not_segments} not segment files)"
        + (f"; deleted {len(doc['deleted'])}" if args.delete else "; nothing deleted")
    )
    return 0
