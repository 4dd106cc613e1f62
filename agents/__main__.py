"""`floe-agent` / `python -m agents`: run one agent.

Exit codes: 0 after a clean shutdown, 1 when the agent cannot start (rejected key,
unreachable control plane, port in use…), 2 for bad flags. Each failure is one line.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from agents.config import ConfigError, parse_config
from agents.runtime import StartupError, configure_logging, run_agent


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run the agent until SIGINT/SIGTERM, return the exit code."""
    try:
        config = parse_config(argv)
    except ConfigError as exc:
        print(f"floe-agent: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_level)
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
