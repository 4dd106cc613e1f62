"""Regular expressions read alike by ECMA-262 and Python's `re`.

The REST API's schema says a migration's topic, group and subject patterns are
`format: regex` — ECMA-262, no flags — while the agents and the control plane match names
with Python's `re`. The same text can mean different things to the two, or be refused by
one of them. `dialect_problem` finds the first such place (its position and why), so the
API refuses it; `ecma_compile` turns an accepted pattern into a Python pattern that
matches what ECMA-262 would:

- `\\d`, `\\w`, `\\b` are ASCII in ECMA-262 (Unicode in Python's `str` patterns): `re.ASCII`;
- `\\s` is ECMA-262's white space and line terminators (`\\ufeff` yes, `\\x1c` no);
- `.` matches anything but `\\n`, `\\r`, `\\u2028`, `\\u2029`; `$` only the very end;
- ECMA-262 (without the u flag) reads patterns and names as UTF-16 units: a character
  outside the Basic Multilingual Plane is two (`😀+` repeats its second half; `.` takes
  one half). Such characters, in the pattern and in the name, are matched as their two
  surrogates alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ECMA-262's WhiteSpace and LineTerminator, as a character class body.
_ECMA_SPACE = (
    "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
_ECMA_DOT = "[^\\n\\r\\u2028\\u2029]"
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")
_MODIFIERS = re.compile(r"\(\?[a-zA-Z]*(-[a-zA-Z]*)?:")
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
# Escapes that mean the same to both and are kept as written (`\b`, `\B`, `\d`, `\D`, `\w`,
# `\W` under `re.ASCII`; in a class `\b` is a backspace to both).
_KEPT = set("dDwWfnrtv")
# Literal members of a class that Python's `re` warns about in pairs (`[[`, `&&`, `~~`,
# `||`: set syntax it may take up), written escaped so it reads them as ECMA-262 does.
_CLASS_ESCAPED = set("[&~|")


@dataclass(frozen=True)
class DialectProblem:
    """Where a pattern stops meaning one thing to both dialects, and why."""

    position: int
    reason: str

    def __str__(self) -> str:
        return f"{self.reason} at position {self.position}"


class _Refused(Exception):
    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.problem = DialectProblem(position, reason)


def dialect_problem(text: str) -> DialectProblem | None:
    """The first place where ECMA-262 (no flags) would refuse `text` or read it otherwise
    than Python's `re` (as `ecma_compile` translates it), or None. Python's own refusals
    are `re.compile`'s to report."""
    try:
        _Translator(text).translate()
    except _Refused as refused:
        return refused.problem
    return None


class EcmaPattern:
    """A pattern that matches names as ECMA-262 matches them (`fullmatch`)."""

    def __init__(self, source: str, compiled: re.Pattern[str], *, as_units: bool) -> None:
        self.source = source
        self.compiled = compiled
        self.as_units = as_units

    def fullmatch(self, name: str) -> bool:
        """Whether the whole of `name` matches (ECMA-262's `^(?:pattern)$`)."""
        if self.as_units and max(name, default="\0") > "\uffff":
            name = "".join(_units(char) for char in name)
        return self.compiled.fullmatch(name) is not None


def ecma_compile(text: str) -> EcmaPattern:
    """`text` as a pattern that matches what ECMA-262 matches. A pattern stored before the
    API checked the dialect, which `dialect_problem` refuses, keeps Python's reading.
    Raises `re.error` (or OverflowError, RecursionError) where Python's `re` refuses the
    text."""
    try:
        translated = _Translator(text).translate()
    except _Refused:
        return EcmaPattern(text, re.compile(text), as_units=False)
    return EcmaPattern(text, re.compile(translated, re.ASCII), as_units=True)


def _units(char: str) -> str:
    """`char` as ECMA-262 sees it: itself, or the two surrogates of its UTF-16 form."""
    code = ord(char)
    if code <= 0xFFFF:
        return char
    code -= 0x10000
    return chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF))


def _escaped_units(char: str) -> str:
    """A literal character of the pattern for the translated pattern: astral ones as the
    `\\uXXXX` escapes of their two surrogates (matched against names in that form)."""
    if ord(char) <= 0xFFFF:
        return char
    return "".join(f"\\u{ord(unit):04x}" for unit in _units(char))


class _Translator:
    """One pass over the pattern: ECMA-262's reading, written for Python's `re`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.out: list[str] = []
        # What a quantifier here would repeat: "atom", "lookaround", or None (nothing:
        # the start, `(`, `|`, an anchor; or a quantifier just read).
        self.previous: str | None = None
        self.groups: list[str] = []

    def translate(self) -> str:
        text = self.text
        while self.position < len(text):
            start, char = self.position, text[self.position]
            if char == "\\":
                self.out.append(self._escape(in_class=False))
                self.previous = "atom"
            elif char == "[":
                self.out.append(self._char_class())
                self.previous = "atom"
            elif char == "(":
                self._group_open()
            elif char == ")":
                kind = self.groups.pop() if self.groups else "group"
                self.out.append(")")
                self.position += 1
                self.previous = "lookaround" if kind == "lookaround" else "atom"
            elif char in "*+?" or (char == "{" and _QUANTIFIER.match(text, start)):
                self._quantifier()
            elif char in "{}]":
                escaped = "\\" + char
                self._refuse(
                    start,
                    f"a lone {char!r} (a literal to Python's re, an error to ECMA-262: write {escaped})",
                )
            elif char == ".":
                self.out.append(_ECMA_DOT)
                self.position += 1
                self.previous = "atom"
            elif char == "$":
                self.out.append("\\Z")  # Python's `$` also matches before a final newline
                self.position += 1
                self.previous = None
            else:
                self.out.append(_escaped_units(char))  # `^`, `|`, literals: the same to both
                self.position += 1
                self.previous = None if char in "^|" else "atom"
        return "".join(self.out)

    def _refuse(self, position: int, reason: str) -> None:
        raise _Refused(position, reason)

    def _group_open(self) -> None:
        text, start = self.text, self.position
        if not text.startswith("(?", start):
            kind, opener = "group", "("
        elif text.startswith(("(?:",), start):
            kind, opener = "group", "(?:"
        elif text.startswith(("(?=", "(?!"), start):
            kind, opener = "lookaround", text[start : start + 3]
        elif text.startswith(("(?<=", "(?<!"), start):
            kind, opener = "lookaround", text[start : start + 4]
        elif text.startswith("(?<", start):
            kind, opener = "named", ""
            self._refuse(
                start,
                "a named group (?<name>…) (Python's re spells it (?P<name>…), which ECMA-262 refuses): write (…)",
            )
        elif text.startswith("(?P", start):
            self._refuse(start, "Python's (?P…) syntax (ECMA-262 refuses it)")
        elif text.startswith("(?#", start):
            self._refuse(start, "a comment group (?#…) (Python's re only)")
        elif text.startswith("(?>", start):
            self._refuse(start, "an atomic group (?>…) (Python's re only)")
        elif text.startswith("(?(", start):
            self._refuse(start, "a conditional group (?(…)…) (Python's re only)")
        elif _MODIFIERS.match(text, start):
            self._refuse(
                start,
                "a modifier group (?flags:…) (new to ECMA-262, and Python's re folds case "
                "otherwise)",
            )
        else:
            self._refuse(start, "inline flags (?…) (Python's re only)")
        self.groups.append(kind)
        self.out.append(opener)
        self.position += len(opener)
        self.previous = None

    def _quantifier(self) -> None:
        text, start = self.text, self.position
        if self.previous == "lookaround":
            self._refuse(
                start,
                "a quantified lookaround (ECMA-262 refuses it with the u flag and reads it otherwise without)",
            )
        if text[start] == "{":
            found = _QUANTIFIER.match(text, start)
            assert found is not None
            end = found.end()
        else:
            end = start + 1
        if text[end : end + 1] == "+":
            self._refuse(end, "a possessive quantifier (Python's re only)")
        if text[end : end + 1] == "?":
            end += 1  # lazy: the same to both
        self.out.append(text[start:end])
        self.position = end
        self.previous = None

    def _escape(self, *, in_class: bool) -> str:
        """The escape at the position (a backslash), as Python should read it."""
        text, start = self.text, self.position
        if start + 1 >= len(text):
            self._refuse(start, "a trailing backslash")
        char = text[start + 1]
        self.position = start + 2
        if char in _KEPT or (char in "bB" and not in_class):
            return "\\" + char
        if char == "b":
            return "\\x08"
        if char == "s":
            return _ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]"
        if char == "S" and not in_class:
            return f"[^{_ECMA_SPACE}]"
        if char == "0":
            if text[start + 2 : start + 3].isdigit():
                self._refuse(start, "an octal escape (Python's re only): write \\xHH")
            return "\\x00"
        if char.isdigit() and in_class:
            self._refuse(start, "an octal escape (Python's re only): write \\xHH")
        if char.isdigit():
            self._refuse(
                start,
                "a backreference (ECMA-262 matches a group not set as empty, Python's re "
                "fails the match)",
            )
        if char == "x" or char == "u":
            digits = _HEX2 if char == "x" else _HEX4
            if not digits.match(text, start + 2):
                self._refuse(start, f"\\{char} without {2 if char == 'x' else 4} hex digits")
            self.position = start + (4 if char == "x" else 6)
            return text[start : self.position]
        if char in "AZ":
            self._refuse(
                start,
                f"\\{char} (Python's re only: ECMA-262 spells it {'^' if char == 'A' else '$'})",
            )
        if char.isascii() and not char.isalnum():
            return "\\" + char  # an escaped punctuation character: itself to both
        self._refuse(
            start,
            f"the escape \\{char} (ECMA-262 and Python's re read it differently, or one refuses it)",
        )
        raise AssertionError  # unreachable: _refuse raises

    def _char_class(self) -> str:
        """The class at the position (`[`), as Python should read it."""
        text, start = self.text, self.position
        self.position += 1
        negated = text.startswith("^", self.position)
        if negated:
            self.position += 1
        if text.startswith("]", self.position):
            self._refuse(
                self.position,
                "a class opening with ']' (an empty class to ECMA-262, [^] any character; "
                "a ']' member to Python's re): write \\]",
            )
        members: list[str] = []
        not_space = False
        while True:
            if self.position >= len(text):
                self._refuse(start, "an unterminated character class")
            char = text[self.position]
            if char == "]":
                self.position += 1
                break
            if char == "\\":
                if text[self.position + 1 : self.position + 2] == "S":
                    not_space = True
                    self.position += 2
                    continue
                if text[self.position + 1 : self.position + 2] == "B":
                    self._refuse(
                        self.position,
                        "\\B in a class (ECMA-262 reads a 'B', Python's re refuses it)",
                    )
                members.append(self._escape(in_class=True))
                continue
            members.append("\\" + char if char in _CLASS_ESCAPED else _escaped_units(char))
            self.position += 1
        body = "".join(members)
        if not not_space:
            return f"[{'^' if negated else ''}{body}]"
        # `\S` in a class: Python's `[^…]` cannot sit inside another class.
        either = f"[^{_ECMA_SPACE}]" + (f"|[{body}]" if body else "")
        return f"(?:(?!{either})[\\s\\S])" if negated else f"(?:{either})"
