"""`main(argv)` of every job: read a plan file, run the job, write its result as JSON.

    python -m jobs.compaction --plan plan.json --result result.json [--master local[2]]
    spark-submit --master spark://host:7077 jobs/compaction.py --plan plan.json

With no ``--result`` (or ``-``) the result goes to stdout as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from jobs.session import spark_session


def job_main(
    argv: Sequence[str] | None, *, name: str, run: Callable[[SparkSession, dict], dict]
) -> int:
    parser = argparse.ArgumentParser(prog=f"jobs.{name}", description=f"Floe's {name} job.")
    parser.add_argument("--plan", required=True, help="the plan (JSON) the control plane wrote")
    parser.add_argument("--result", default="-", help="where to write the result (JSON)")
    parser.add_argument("--master", default=None, help="Spark master [SPARK_MASTER, local[*]]")
    args = parser.parse_args(argv)
    with open(args.plan, encoding="utf-8") as source:
        plan = json.load(source)
    result = run(spark_session(args.master), plan)
    text = json.dumps(result, separators=(",", ":"))
    if args.result == "-":
        sys.stdout.write(text + "\n")
    else:
        with open(args.result, "w", encoding="utf-8") as out:
            out.write(text)
    return 0
