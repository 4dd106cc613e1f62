"""What a subcommand raises to end with one line on stderr and an exit code (1: the
operation failed — unreachable server, a Kafka error, a corrupt file; 2: bad input)."""

from __future__ import annotations


class CommandFailed(Exception):
    """The operation failed (exit code 1)."""


class BadInput(Exception):
    """The command line or its input is wrong (exit code 2)."""
