"""The SparkSession the jobs run on: one per process, created on first use.

Spark's start-up costs seconds (a JVM), so a long-lived process (the Celery worker, a
test run) builds one session and keeps it. For ``local[*]`` masters the executors'
Python workers are this interpreter with this checkout on their path, so they import
``agents`` and ``jobs`` exactly as the driver does; on a real cluster install the
``floe`` package on the workers instead. Executors of a real cluster get the driver's
``AWS_*`` variables (``spark.executorEnv``): they read and write the bucket themselves.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_CHECKOUT = str(Path(__file__).resolve().parent.parent)
_lock = threading.Lock()
_session: SparkSession | None = None


def spark_session(
    master: str | None = None, *, shuffle_partitions: int | None = None
) -> SparkSession:
    """This process's session, created with `master` the first time (later calls reuse it)."""
    global _session
    with _lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            return _session
        master = master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
        # The executors' Python: RDD work reads this variable, not spark.pyspark.python.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        local = master.startswith("local")
        if local:
            # Inherited by the JVM and from it by the Python workers it forks.
            paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            if _CHECKOUT not in paths:
                os.environ["PYTHONPATH"] = os.pathsep.join([_CHECKOUT, *paths])
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            SparkSession.builder.appName("floe-jobs")
            .master(master)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions or (4 if local else 64)))
            .config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            # Results (batch pointers) can be large; they are only metadata.
            .config("spark.driver.maxResultSize", "2g")
        )
        loopback = local or os.environ.get("SPARK_LOCAL_IP") == "127.0.0.1"
        if loopback:
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1"
            )
        if not local:
            # Executors open the bucket themselves, with this process's credentials (an
            # agent's, in its own environment), and import the jobs from this checkout
            # when they run on the same machines (else install floe on the workers).
            for name, value in os.environ.items():
                if name.startswith("AWS_"):
                    builder = builder.config(f"spark.executorEnv.{name}", value)
            builder = builder.config("spark.executorEnv.PYTHONPATH", _CHECKOUT)
        # py4j logs every connection at INFO, even from destructors at interpreter exit.
        logging.getLogger("py4j").setLevel(logging.WARNING)
        _session = builder.getOrCreate()
        _session.sparkContext.setLogLevel("ERROR")
        return _session


def active_fraction() -> float | None:
    """How far the running Spark stages are (completed tasks / tasks), or None when
    nothing runs: the progress a jobs-role agent reports while it waits for a job."""
    session = _session
    if session is None or session.sparkContext._jsc is None:
        return None
    tracker = session.sparkContext.statusTracker()
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done / total if total else None
