"""`floe-agent` / `python -m agents`: run one agent.

Exit codes: 0 after a clean shutdown, 1 when the agent cannot start (rejected key,
unreachable control plane, port in use…), 2 for bad flags. Each failure is one line.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import resource
import sys
from collections.abc import Sequence

from agents.config import ConfigError, parse_config
from agents.runtime import StartupError, configure_logging, run_agent


def raise_file_limit() -> int:
    """Lift the soft limit on open files to the hard one: each client connection is a
    file descriptor, and many systems start processes at 1,024. Returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = 1_048_576 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:  # a container may refuse; keep what we have
            logging.getLogger(__name__).warning("cannot raise the open-file limit: %s", exc)
    return soft


def tune_gc() -> None:
    """Collect cycles less often. An agent allocates and frees objects at a high rate
    (records, requests) and keeps some for a while (a pipeline's staged records, parked
    produce requests): at Python's default threshold of 700 young objects those are
    promoted and set off full collections over every object the agent holds, a few
    microseconds of CPU per pipeline record. The objects of the imports are frozen out
    of the collections altogether (they live as long as the process)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 10)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run the agent until SIGINT/SIGTERM, return the exit code."""
    try:
        config = parse_config(argv)
    except ConfigError as exc:
        print(f"floe-agent: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_level)
    raise_file_limit()
    tune_gc()
    try:
        asyncio.run(run_agent(config))
    except StartupError as exc:
        print(f"floe-agent: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
