"""CEL expressions of a pipeline: compiled once, checked before anything runs, evaluated
per record with only what they read.

CEL (the Common Expression Language, through the `cel` package: Rust bindings of
cel-rust) has no I/O, no loops of its own and no user-defined functions; its only
iteration is the comprehension macros (`map`, `filter`, `all`, `exists`, `exists_one`)
over a list or map that already exists, and its regular expressions are linear-time.
What an expression costs therefore grows with the record's size to the power of its
macro nesting: this module refuses an expression longer than `MAX_EXPRESSION_CHARS`
or nesting macros deeper than `MAX_MACRO_DEPTH`, so the cost stays polynomial with a
small degree. No function is registered with the evaluator, so nothing but CEL's own
standard functions can be called.

Handing a value to the evaluator converts it, key by key, into CEL's own values (about
2 µs a key): a 1 KiB JSON record costs far more to convert than to evaluate. So each
expression is read once for the fields of `value` that it selects (`value.amount`,
`value.user.name`, `value["a-b"]`), and only those are handed over — unless it uses
`value` whole (`size(value)`, `value.map(...)`), when all of it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import cel

#: The variables every expression may read (docs/PIPELINES.md).
VARIABLES = ("value", "key", "headers", "topic", "partition", "offset", "timestamp")
MAX_EXPRESSION_CHARS = 4096
MAX_MACRO_DEPTH = 2
_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})

# A projection: for each selected field, None (the whole field) or the projection of
# its own fields. `WHOLE` (None at the top) means the expression needs the whole value.
Projection = dict[str, "Projection | None"]

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
       |'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[uU]?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+): (.*)")


class ExpressionError(ValueError):
    """An expression that does not compile or is refused; `line`/`column` (1-based,
    within the expression) say where, when known."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _tokens(source: str) -> list[_Token]:
    out = []
    for m in _TOKEN.finditer(source):
        kind = m.lastgroup or "punct"
        if kind != "space":
            out.append(_Token(kind, m.group(), m.start()))
    return out


def _position(source: str, at: int) -> tuple[int, int]:
    line = source.count("\n", 0, at) + 1
    return line, at - (source.rfind("\n", 0, at) + 1) + 1


def _simple_string(token: _Token) -> str | None:
    """The text of a plain quoted string literal without escapes, else None."""
    text = token.text
    if token.kind != "string" or text[0] not in "'\"" or "\\" in text or text[:3] in ("'''", '"""'):
        return None
    return text[1:-1]


def _merge(tree: Projection, path: list[str]) -> None:
    node = tree
    for name in path[:-1]:
        if name in node and node[name] is None:
            return  # already needed whole
        sub = node.setdefault(name, {})
        assert sub is not None
        node = sub
    node[path[-1]] = None


def analyse(source: str) -> tuple[Projection | None, frozenset[str]]:
    """The fields of `value` the expression selects (None: it needs all of it) and the
    names its macros bind. Raises `ExpressionError` for a refused expression."""
    if len(source) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    tokens = _tokens(source)
    tree: Projection = {}
    whole = False
    bound: set[str] = set()
    stack: list[bool] = []  # one entry per open bracket: is it a macro's call?
    for i, tok in enumerate(tokens):
        before = tokens[i - 1].text if i else ""
        if tok.text in "([{" and tok.kind == "punct":
            macro = (
                tok.text == "("
                and i >= 2
                and tokens[i - 1].kind == "ident"
                and tokens[i - 1].text in _MACROS
                and tokens[i - 2].text == "."
            )
            stack.append(macro)
            if macro:
                if sum(stack) > MAX_MACRO_DEPTH:
                    line, column = _position(source, tok.at)
                    raise ExpressionError(
                        f"macros nested deeper than {MAX_MACRO_DEPTH} "
                        "(each level multiplies the work by the size of a list)",
                        line,
                        column,
                    )
                if i + 2 < len(tokens) and tokens[i + 1].kind == "ident":
                    bound.add(tokens[i + 1].text)
        elif tok.text in ")]}" and tok.kind == "punct" and stack:
            stack.pop()
        if tok.kind != "ident" or tok.text != "value" or before == ".":
            continue
        path: list[str] = []
        j = i + 1
        while j + 1 < len(tokens):
            nxt, name = tokens[j], tokens[j + 1]
            if nxt.text == "." and name.kind == "ident":
                if j + 2 < len(tokens) and tokens[j + 2].text == "(":
                    break  # a method call on what the path selects
                path.append(name.text)
                j += 2
            elif nxt.text == "[" and j + 2 < len(tokens) and tokens[j + 2].text == "]":
                field = _simple_string(name)
                if field is None:
                    break
                path.append(field)
                j += 3
            else:
                break
        if path:
            _merge(tree, path)
        else:
            whole = True
    return (None if whole else tree), frozenset(bound)


def project(value: Any, tree: Projection) -> Any:
    """`value` with only the fields of `tree` (the whole value when it is no map)."""
    if type(value) is not dict:
        return value
    out = {}
    for name, sub in tree.items():
        if name in value:
            field = value[name]
            out[name] = field if sub is None else project(field, sub)
    return out


class Expression:
    """One compiled CEL expression and what it reads."""

    __slots__ = ("source", "program", "variables", "projection")

    def __init__(self, source: str) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ExpressionError("the expression is empty")
        projection, bound = analyse(source)
        try:
            program = cel.compile(source)
        except Exception as exc:  # the binding raises ValueError; be safe with others
            text = str(exc)
            m = _CEL_ERROR.search(text)
            if m:
                raise ExpressionError(
                    f"CEL: {m.group(3).strip()}", int(m.group(1)), int(m.group(2))
                ) from None
            raise ExpressionError(f"CEL: {text.splitlines()[0] if text else exc!r}") from None
        names = set(program.variables())
        unknown = sorted(names - set(VARIABLES) - bound)
        if unknown:
            at = source.find(unknown[0])
            line, column = _position(source, max(at, 0))
            raise ExpressionError(
                f"unknown variable {unknown[0]!r} (an expression reads {', '.join(VARIABLES)})",
                line,
                column,
            )
        self.source = source
        self.program = program
        self.variables = tuple(v for v in VARIABLES if v in names)
        self.projection = projection

    def evaluate(self, activation: dict[str, Any]) -> Any:
        """The expression's result over `activation` (the variables it reads). Raises
        whatever the evaluator raises; the caller turns it into a record's error."""
        return self.program.execute(activation)

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"
