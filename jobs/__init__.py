"""Floe's Spark jobs: they read and write segment files; they never touch the database.

Each job is ``jobs/<name>.py`` with

* pure transforms ``transform_x(df, *, params) -> DataFrame`` (no I/O; tested on tiny rows),
* ``run(spark, plan) -> result``: extract → transform → load, on plain JSON-able dicts,
* ``main(argv)``: ``--plan plan.json --result result.json`` around ``run`` (spark-submit).

A *plan* is what the control plane hands the job (bucket URL, batch pointers from the
index, parameters); a *result* is what the job hands back (the files it wrote, where
each batch now lives, what it deleted). The control plane then swaps the metadata in
one compare-and-swap transaction (``virtualclusters/jobs/services.py``). Executors
reach the bucket through ``core.storage`` (``file://`` or ``s3://``: executors are
separate processes, so ``mem://`` cannot work) and the segment format. Only offsets,
sizes and keys of *objects* ever reach the driver — record keys and values stay in the
executors (invariant 5).

Jobs: ``compaction`` (small level-0 files → large level-1 files), ``key_compaction``
(latest record per key of ``cleanup.policy=compact`` topics), ``retention`` (delete files
that are unreferenced and past their grace period) and ``orphan_cleanup`` (delete objects
no file row knows). How they are run: ``jobs/runner.py``.
"""
