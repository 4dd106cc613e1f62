"""The documents users read say what a thing is, not which of our issues built it: readers
do not know the issue tracker's numbers."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def issue_numbers(text: str) -> list[str]:
    return [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in ISSUE_NUMBER.finditer(text)
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_documents_name_no_issue_numbers(document):
    assert issue_numbers(document.read_text()) == []


def test_the_check_sees_an_issue_number():
    assert issue_numbers("fan-out (issue 44: 1, 50)\nsee Issues #7 and\nissue\n40") == [
        "line 1: 'issue 44'",
        "line 2: 'Issues #7'",
        "line 3: 'issue\\n40'",
    ]
