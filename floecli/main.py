"""``floe``: the entry point. Each subcommand is a module with ``add_parser(subparsers)``
that sets ``run(args) -> int``; errors end in one line on stderr, never a traceback.

Exit codes: 0 done, 1 the operation failed (a server unreachable, a Kafka error, a
corrupt file), 2 bad input (the command line, a malformed value)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from floecli import benchmark, console, diagnose_record, file_reader, file_scrubber, group_lag
from floecli.errors import BadInput, CommandFailed

SUBCOMMANDS = (console, group_lag, benchmark, file_reader, diagnose_record, file_scrubber)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="floe",
        description="Operators' tools for a Floe cluster (Kafka clients, lag, benchmarks, "
        "segment files).",
    )
    subparsers = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.add_parsers(subparsers)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)  # exits 2 with argparse's one-line usage error
    try:
        code: int = args.run(args)
        return code
    except BadInput as exc:
        print(f"floe {args.command}: {exc}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"floe {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `floe console-consumer … | head`
        return 0
    except Exception as exc:  # a library's error we did not foresee: still one line
        print(f"floe {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
