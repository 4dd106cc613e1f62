"""A faster road for the simplest expressions, with CEL as the authority.

Each call into the CEL evaluator costs a few microseconds before any work (the binding
converts the variables, builds an activation, converts the result back), which is most
of a simple pipeline's time per record. Expressions made only of field selections on
`value` (and the scalar variables), literals, comparisons, `&&`, `||`, `!`, arithmetic,
`? :`, `in`, `has()`, `size()`, `startsWith`/`endsWith`/`contains` and list or map
literals are also compiled here into Python closures. A closure computes the result only
for the operand types whose meaning it is sure of (two ints, two doubles, two strings,
two bools, nulls) and gives up (`Fallback`) on anything else — a missing field, mixed
types, an int past 64 bits, a division by zero — and then the record's expression is
evaluated by CEL, whose result or error is the one that counts. The closures read, never
call, anything of the record's; tests/core/test_pipelines_fastpath.py compares them with
CEL over many generated expressions and values.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from core.pipelines.expressions import _decode, _Raw, _simple_string, _Token, _tokens

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
Getter = Callable[[Any], Any]  # of a `processors.Flow`


class Fallback(Exception):
    """This value is not one the fast road is sure of: ask CEL."""


class Unsupported(Exception):
    """The expression uses something the fast road does not compile."""


_FALLBACK = Fallback()


def value_variable(flow: Any) -> Any:
    return flow.value


def _scalar(getter: Getter) -> Getter:
    """Mark `getter` as one whose result is never a list or map (no copy needed)."""
    setattr(getter, "_floe_scalar", True)  # noqa: B010
    return getter


def _int(n: int) -> int:
    if INT_MIN <= n <= INT_MAX:
        return n
    raise _FALLBACK


def _plain(value: Any) -> Any:
    """A copy of a value as CEL would hand it back (no int past 64 bits), its maps' keys
    sorted as `processors.ordered` sorts CEL's."""
    kind = type(value)
    if kind is str or kind is float or kind is bool or value is None:
        return value
    if kind is int:
        if INT_MIN <= value <= INT_MAX:
            return value
        raise _FALLBACK
    if kind is dict:
        out = {}
        for k in sorted(value):  # (a non-string key: TypeError, so CEL decides)
            if type(k) is not str:
                raise _FALLBACK
            item = value[k]
            out[k] = item if type(item) is str else _plain(item)
        return out
    if kind is list:
        return [item if type(item) is str else _plain(item) for item in value]
    raise _FALLBACK


_SCALARS = (int, float, str, bool)
_NO_CONSTANT = object()


def _constant(value: Any) -> Getter:
    def get(flow: Any) -> Any:
        return value

    setattr(get, "_floe_constant", value)  # noqa: B010
    return _scalar(get)


def _same_scalar(a: Any, b: Any) -> bool:
    kind = type(a)
    return kind is type(b) and (kind in _SCALARS or a is None)


def _compare(op: str, left: Getter, right: Getter) -> Getter:
    if op == "==":

        def eq(flow: Any) -> Any:
            a, b = left(flow), right(flow)
            if not _same_scalar(a, b):
                raise _FALLBACK
            return a == b

        return _scalar(eq)
    if op == "!=":

        def ne(flow: Any) -> Any:
            a, b = left(flow), right(flow)
            if not _same_scalar(a, b):
                raise _FALLBACK
            return a != b

        return _scalar(ne)
    fn: Callable[[Any, Any], bool] = {
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }[op]
    constant: Any = getattr(right, "_floe_constant", _NO_CONSTANT)
    if type(constant) in (int, float, str):
        kind_c = type(constant)

        def order_constant(flow: Any) -> Any:
            a = left(flow)
            if type(a) is not kind_c:
                raise _FALLBACK
            return fn(a, constant)

        return _scalar(order_constant)

    def order(flow: Any) -> Any:
        a, b = left(flow), right(flow)
        kind = type(a)
        if kind is not type(b) or kind not in (int, float, str):
            raise _FALLBACK
        return fn(a, b)

    return _scalar(order)


def _arith(op: str, left: Getter, right: Getter) -> Getter:
    def run(flow: Any) -> Any:
        a, b = left(flow), right(flow)
        kind = type(a)
        if kind is not type(b):
            raise _FALLBACK
        if kind is int:
            if op == "+":
                return _int(a + b)
            if op == "-":
                return _int(a - b)
            if op == "*":
                return _int(a * b)
            if op == "/":
                if b == 0 or (a == INT_MIN and b == -1):
                    raise _FALLBACK
                q = abs(a) // abs(b)
                return q if (a < 0) == (b < 0) else -q
            if a < 0 or b <= 0:  # %: CEL truncates, Python floors; agree when both positive
                raise _FALLBACK
            return a % b
        if kind is float:
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/" and b != 0.0:
                return a / b
            raise _FALLBACK
        if kind is str and op == "+":
            return a + b
        raise _FALLBACK

    return run


class _Parser:
    """A recursive-descent reader of the supported part of CEL's grammar."""

    def __init__(self, source: str, variables: dict[str, Getter]) -> None:
        self.tokens = _tokens(source)
        self.at = 0
        self.variables = variables

    def peek(self, n: int = 0) -> _Token | None:
        i = self.at + n
        return self.tokens[i] if i < len(self.tokens) else None

    def text(self, n: int = 0) -> str:
        tok = self.peek(n)
        return tok.text if tok else ""

    def kind(self, n: int = 0) -> str:
        tok = self.peek(n)
        return tok.kind if tok else ""

    def take(self, text: str) -> None:
        if self.text() != text:
            raise Unsupported(text)
        self.at += 1

    def op(self, *ops: str) -> str | None:
        """The operator at the cursor, taken, if one of `ops` (two-character ones are
        two punctuation tokens side by side)."""
        first, second = self.peek(), self.peek(1)
        if first is None or first.kind != "punct":
            return None
        if second is not None and second.kind == "punct" and second.at == first.at + 1:
            double = first.text + second.text
            if double in ("&&", "||", "==", "!=", "<=", ">="):
                if double in ops:
                    self.at += 2
                    return double
                return None
        if first.text in ops:
            self.at += 1
            return first.text
        return None

    def parse(self) -> Getter:
        getter = self.conditional()
        if self.peek() is not None:
            raise Unsupported("trailing")
        return getter

    def conditional(self) -> Getter:
        cond = self.or_()
        if self.op("?"):
            yes = self.conditional()
            self.take(":")
            no = self.conditional()

            def pick(flow: Any) -> Any:
                c = cond(flow)
                if c is True:
                    return yes(flow)
                if c is False:
                    return no(flow)
                raise _FALLBACK

            return pick
        return cond

    def or_(self) -> Getter:
        left = self.and_()
        while self.op("||"):
            right = self.and_()
            left = _logical(left, right, short=True)
        return left

    def and_(self) -> Getter:
        left = self.relation()
        while self.op("&&"):
            right = self.relation()
            left = _logical(left, right, short=False)
        return left

    def relation(self) -> Getter:
        left = self.additive()
        op = self.op("==", "!=", "<=", ">=", "<", ">")
        if op:
            right = self.additive()
            if self.op("==", "!=", "<=", ">=", "<", ">"):
                raise Unsupported("chained relation")
            return _compare(op, left, right)
        if self.text() == "in" and self.kind() == "ident":
            self.at += 1
            return _membership(left, self.additive())
        return left

    def additive(self) -> Getter:
        left = self.multiplicative()
        while op := self.op("+", "-"):
            left = _arith(op, left, self.multiplicative())
        return left

    def multiplicative(self) -> Getter:
        left = self.unary()
        while op := self.op("*", "/", "%"):
            left = _arith(op, left, self.unary())
        return left

    def unary(self) -> Getter:
        if self.op("!"):
            inner = self.unary()

            def negate(flow: Any) -> Any:
                v = inner(flow)
                if type(v) is not bool:
                    raise _FALLBACK
                return not v

            return _scalar(negate)
        if self.op("-"):
            tok = self.peek()
            if tok is not None and tok.kind == "number":
                return self.member(self.number(negative=True))
            inner = self.unary()

            def minus(flow: Any) -> Any:
                v = inner(flow)
                if type(v) is int:
                    return _int(-v)
                if type(v) is float:
                    return -v
                raise _FALLBACK

            return minus
        return self.member(self.primary())

    def number(self, negative: bool = False) -> Getter:
        tok = self.peek()
        assert tok is not None
        self.at += 1
        text = tok.text
        if text[-1] in "uU":
            raise Unsupported("uint")
        if text.lower().startswith("0x"):
            value: int | float = int(text, 16)
        elif any(c in text for c in ".eE"):
            value = float(text)
        else:
            value = int(text)
        if negative:
            value = -value
        if type(value) is int and not INT_MIN <= value <= INT_MAX:
            raise Unsupported("int literal")
        return _constant(value)

    def primary(self) -> Getter:
        tok = self.peek()
        if tok is None:
            raise Unsupported("end")
        if tok.kind == "number":
            return self.number()
        if tok.kind == "string":
            literal = _simple_string(tok)
            if literal is None:
                raise Unsupported("string")
            self.at += 1
            return _constant(literal)
        if tok.kind == "ident":
            self.at += 1
            name = tok.text
            if name in ("true", "false", "null"):
                return _constant({"true": True, "false": False, "null": None}[name])
            if name in ("has", "size") and self.text() == "(":
                self.take("(")
                inner = self.conditional() if name == "size" else self.path_for_has()
                self.take(")")
                return _size(inner) if name == "size" else inner
            if name in self.variables:
                return self.variables[name]
            raise Unsupported(name)
        if tok.text == "(":
            self.at += 1
            inner = self.conditional()
            self.take(")")
            return inner
        if tok.text == "[":
            self.at += 1
            items = self.items("]")
            return lambda flow: [item(flow) for item in items]
        if tok.text == "{":
            return self.map_literal()
        raise Unsupported(tok.text)

    def items(self, close: str) -> list[Getter]:
        items: list[Getter] = []
        while self.text() != close:
            items.append(self.conditional())
            if self.text() == ",":
                self.at += 1
            elif self.text() != close:
                raise Unsupported("list")
        self.take(close)
        return items

    def map_literal(self) -> Getter:
        self.take("{")
        entries: list[tuple[str, Getter]] = []
        while self.text() != "}":
            tok = self.peek()
            name = _simple_string(tok) if tok is not None else None
            if name is None or any(name == n for n, _ in entries):
                raise Unsupported("map key")
            self.at += 1
            self.take(":")
            entries.append((name, self.conditional()))
            if self.text() == ",":
                self.at += 1
            elif self.text() != "}":
                raise Unsupported("map")
        self.take("}")
        return lambda flow: {name: get(flow) for name, get in entries}

    def member(self, getter: Getter) -> Getter:
        while True:
            if self.text() == "." and self.kind(1) == "ident":
                name = self.text(1)
                if self.text(2) == "(":
                    self.at += 3
                    args = self.items(")")
                    getter = _method(name, getter, args)
                else:
                    self.at += 2
                    getter = _field(getter, name)
            elif self.text() == "[":
                tok = self.peek(1)
                key = _simple_string(tok) if tok is not None else None
                if key is None or self.text(2) != "]":
                    raise Unsupported("index")
                self.at += 3
                getter = _field(getter, key)
            else:
                return getter

    def path_for_has(self) -> Getter:
        """``has(x.a.b)``: x.a must be a map (else CEL decides); is b among its keys?"""
        getter = self.primary()
        names = []
        while self.text() == "." and self.kind(1) == "ident":
            names.append(self.text(1))
            self.at += 2
        if not names:
            raise Unsupported("has")
        for name in names[:-1]:
            getter = _field(getter, name)
        last = names[-1]

        def has(flow: Any) -> Any:
            holder = getter(flow)
            if type(holder) is not dict:
                raise _FALLBACK
            return last in holder

        return _scalar(has)


def _logical(left: Getter, right: Getter, short: bool) -> Getter:
    """``||`` (short=True: true wins) or ``&&`` (false wins). CEL's are commutative over
    errors; the fast road decides only when the left side is a bool."""

    def run(flow: Any) -> Any:
        a = left(flow)
        if type(a) is not bool:
            raise _FALLBACK
        if a is short:
            return a
        b = right(flow)
        if type(b) is not bool:
            raise _FALLBACK
        return b

    return _scalar(run)


def _field(getter: Getter, name: str) -> Getter:
    def select(flow: Any) -> Any:
        holder = getter(flow)
        if type(holder) is not dict:
            raise _FALLBACK
        try:
            value = holder[name]
        except KeyError:
            raise _FALLBACK from None
        kind = type(value)
        if kind is _Raw:
            value = holder[name] = _decode(value)
            kind = type(value)
        if kind is int and not INT_MIN <= value <= INT_MAX:
            raise _FALLBACK
        return value

    # The commonest is a field of the record's value: `select`'s body again, reading
    # `flow.value` in place, on purpose. Written once it cost more CPU per record in
    # bench/pipeline_engine.py: a shared `_pick(holder, name)` 20-40 ns per field read
    # (1-3 % a record), one body testing which holder it reads 1-4 % a record.
    if getter is value_variable:

        def select_value(flow: Any) -> Any:
            holder = flow.value
            if type(holder) is not dict:
                raise _FALLBACK
            try:
                value = holder[name]
            except KeyError:
                raise _FALLBACK from None
            kind = type(value)
            if kind is _Raw:
                value = holder[name] = _decode(value)
                kind = type(value)
            if kind is int and not INT_MIN <= value <= INT_MAX:
                raise _FALLBACK
            return value

        return select_value
    return select


def _size(inner: Getter) -> Getter:
    def size(flow: Any) -> Any:
        v = inner(flow)
        kind = type(v)
        if kind is list or kind is dict or kind is bytes or (kind is str and v.isascii()):
            return len(v)  # (cel-rust counts a string's UTF-8 bytes: ASCII only here)
        raise _FALLBACK

    return _scalar(size)


def _membership(item: Getter, container: Getter) -> Getter:
    def within(flow: Any) -> Any:
        x, c = item(flow), container(flow)
        if type(c) is list:
            if not all(_same_scalar(x, e) for e in c):
                raise _FALLBACK
            return x in c
        if type(c) is dict and type(x) is str:
            return x in c
        raise _FALLBACK

    return _scalar(within)


def _method(name: str, target: Getter, args: list[Getter]) -> Getter:
    if name == "size" and not args:
        return _size(target)
    if name in ("startsWith", "endsWith", "contains") and len(args) == 1:
        arg = args[0]

        def test(flow: Any) -> Any:
            s, x = target(flow), arg(flow)
            if type(s) is not str or type(x) is not str:
                raise _FALLBACK
            if name == "startsWith":
                return s.startswith(x)
            if name == "endsWith":
                return s.endswith(x)
            return x in s

        return _scalar(test)
    raise Unsupported(name)


def compile_fast(source: str, variables: dict[str, Getter]) -> Getter | None:
    """A closure computing `source` over a flow for the values it is sure of (raising
    `Fallback` otherwise), or None when the expression is outside what it compiles.
    Containers it returns are copies, as CEL's results are."""
    try:
        getter = _Parser(source, variables).parse()
    except (Unsupported, ValueError, IndexError, RecursionError):
        return None
    if getattr(getter, "_floe_scalar", False):
        return getter

    def run(flow: Any) -> Any:
        result = getter(flow)
        kind = type(result)
        if kind is dict or kind is list:
            return _plain(result)
        return result

    return run
