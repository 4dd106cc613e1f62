"""A unified diff of two texts as the console shows it: the Schemas page's two versions of
a schema and a pipeline's two versions of its configuration."""

from __future__ import annotations

import difflib


def diff_lines(old: str, new: str, *, old_name: str, new_name: str) -> list[dict[str, str]]:
    """A unified diff of two texts, each line with its kind (``add``, ``del``, ``hunk``,
    ``same``, ``file``) for the page to colour (the ``diff-<kind>`` classes)."""
    lines = []
    for line in difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_name, new_name, n=3, lineterm=""
    ):
        if line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "same")
        lines.append({"kind": kind, "text": line})
    return lines
