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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cel
import msgspec
from cel.stdlib import EXTENSIONS

#: The variables every expression may read (docs/PIPELINES.md).
VARIABLES = ("value", "key", "headers", "topic", "partition", "offset", "timestamp")
MAX_EXPRESSION_CHARS = 4096
MAX_MACRO_DEPTH = 2
_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})
#: Functions cel-rust has of its own (operators aside).
NATIVE_FUNCTIONS = frozenset(
    {
        "contains", "startsWith", "endsWith", "matches", "size", "string", "int", "uint",
        "double", "bytes", "timestamp", "duration", "type", "dyn", "getFullYear",
        "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours",
        "getMinutes", "getSeconds", "getMilliseconds",
    }
)  # fmt: skip
MAX_TEXT_RESULT = 1 << 20


def _bounded(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` refusing to build a string or list past `MAX_TEXT_RESULT` (nested
    ``replace`` calls would otherwise grow a string exponentially)."""

    def call(*args: Any) -> Any:
        result = function(*args)
        if isinstance(result, str | bytes | list) and len(result) > MAX_TEXT_RESULT:
            raise ValueError(f"a result longer than {MAX_TEXT_RESULT} is refused")
        return result

    return call


# cel-go's extension functions as the `cel` package writes them in Python (strings, math,
# sets, base64, lists): pure functions of their arguments. Left out: `lists.range` (it
# builds a list as long as it is told) and the lists library's `contains` (cel-rust's own
# serves strings, `in` serves lists).
EXTENSION_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: _bounded(function)
    for library in EXTENSIONS.values()
    for name, function in library.items()
    if name not in ("lists.range", "contains")
}
# The evaluator names a namespaced function by its last part (`math.greatest`: greatest)
# and its namespace as a variable (`math`).
_EXTENSIONS_BY_CALL: dict[str, list[str]] = {}
for _name in EXTENSION_FUNCTIONS:
    _EXTENSIONS_BY_CALL.setdefault(_name.rsplit(".", 1)[-1], []).append(_name)
_NAMESPACES = frozenset(name.split(".")[0] for name in EXTENSION_FUNCTIONS if "." in name)

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


# A parsed JSON object keeps its fields' text (`msgspec.Raw`) until something reads them
# (processors.parse_json): most records are read in a few fields and written out whole.
_Raw = msgspec.Raw
_decode = msgspec.json.Decoder().decode


def field(holder: dict[str, Any], name: str) -> Any:
    """`holder[name]`, its JSON text decoded (once: the decoded value replaces it).
    Raises KeyError."""
    value = holder[name]
    if type(value) is _Raw:
        value = holder[name] = _decode(value)
    return value


def whole(value: Any) -> Any:
    """`value` with every field still in JSON text decoded (in place)."""
    if type(value) is dict:
        for name, item in value.items():
            if type(item) is _Raw:
                value[name] = _decode(item)
    return value


def project(value: Any, tree: Projection) -> Any:
    """`value` with only the fields of `tree` (the whole value when it is no map)."""
    if type(value) is not dict:
        return value
    out = {}
    for name, sub in tree.items():
        if name in value:
            item = field(value, name)
            out[name] = whole(item) if sub is None else project(item, sub)
    return out


class Expression:
    """One compiled CEL expression and what it reads."""

    __slots__ = ("source", "program", "variables", "projection", "functions")

    def __init__(self, source: str) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ExpressionError("the expression is empty")
        projection, bound = analyse(source)
        try:
            # (A YAML block scalar ends with a newline: a syntax error "at the end" is
            # then after the last character, not on the line below.)
            program = cel.compile(source.rstrip())
        except Exception as exc:  # the binding raises ValueError; be safe with others
            text = str(exc)
            m = _CEL_ERROR.search(text)
            if m:
                raise ExpressionError(
                    f"CEL: {m.group(3).strip()}", int(m.group(1)), int(m.group(2))
                ) from None
            raise ExpressionError(f"CEL: {text.splitlines()[0] if text else exc!r}") from None
        names = set(program.variables())
        unknown = sorted(names - set(VARIABLES) - bound - _NAMESPACES)
        if unknown:
            at = source.find(unknown[0])
            line, column = _position(source, max(at, 0))
            raise ExpressionError(
                f"unknown variable {unknown[0]!r} (an expression reads {', '.join(VARIABLES)})",
                line,
                column,
            )
        functions: dict[str, Callable[..., Any]] = {}
        for called in program.functions():
            if called[0] in "_@!-" or called in NATIVE_FUNCTIONS:
                continue
            if called not in _EXTENSIONS_BY_CALL:
                at = source.find(called)
                line, column = _position(source, max(at, 0))
                raise ExpressionError(f"unknown function {called!r}", line, column)
            for name in _EXTENSIONS_BY_CALL[called]:
                functions[name] = EXTENSION_FUNCTIONS[name]
        self.functions = functions
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
