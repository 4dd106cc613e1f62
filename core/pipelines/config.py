"""A pipeline's configuration: YAML or JSON text → `PipelineSpec`, or every problem
found, each at its line and column (docs/PIPELINES.md).

The text is read with PyYAML's composer (the C one when present), which gives every node
its position and does not expand aliases; JSON text is first checked by the JSON parser,
so its own syntax errors read as JSON's. A pipeline has no use for YAML anchors and
aliases, so an alias is refused (no alias bomb can be expanded); the text and the
nesting are bounded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from core.pipelines.expressions import Expression, ExpressionError

MAX_CONFIG_BYTES = 256 * 1024
MAX_PROCESSORS = 100
MAX_DEPTH = 32
MAX_OUTPUTS = 32
DEFAULT_OUTPUT = "default"
#: `Emit.output` of a dead-letter record (no output can be named so).
DEAD_LETTER = "$dead_letter"

_TOPIC = re.compile(r"(?!\.\.?$)[a-zA-Z0-9._-]{1,249}")
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ConfigProblem:
    """One problem of a configuration: where (1-based line and column in the text; the
    path of the offending node, e.g. ``processors[2].filter``) and what."""

    line: int
    column: int
    path: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
        }


class ConfigError(ValueError):
    """The configuration is refused; `problems` lists every problem found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        first = problems[0] if problems else None
        text = f"{first.line}:{first.column} {first.path}: {first.message}" if first else ""
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"invalid pipeline configuration: {text}{more}")


@dataclass(frozen=True)
class KafkaInput:
    topics: tuple[str, ...]
    group: str | None = None  # None: the runner's default, "floe-pipeline-<name>"
    start: str = "earliest"  # earliest | latest, when the group has no offsets


@dataclass(frozen=True)
class HttpInput:
    pass


@dataclass(frozen=True)
class KafkaOutput:
    topic: str


@dataclass(frozen=True)
class BucketOutput:
    prefix: str
    max_records: int = 10_000
    max_age_seconds: float = 60.0


@dataclass(frozen=True)
class HttpOutput:
    url: str
    timeout_seconds: float = 5.0


Output = KafkaOutput | BucketOutput | HttpOutput


@dataclass(frozen=True)
class ProcessorSpec:
    """One processor: its kind (``map``, ``filter``…), its options in canonical form, and
    where it stands (index in `processors`, line and column)."""

    kind: str
    options: Any
    index: int
    line: int = 1
    column: int = 1


@dataclass(frozen=True)
class PipelineSpec:
    input: KafkaInput | HttpInput
    processors: tuple[ProcessorSpec, ...]
    outputs: dict[str, Output]
    dead_letter: KafkaOutput | None = None
    source: str = field(default="", compare=False, repr=False)
    # Where each node the reader read stands in `source`: path → 1-based (line, column).
    positions: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    def position_of(self, path: str) -> tuple[int, int]:
        """The 1-based (line, column) in `source` of the node at `path` (as a problem's
        path reads, e.g. ``outputs.default.kafka.topic``), else of its nearest ancestor
        that the reader read; (1, 1) for none."""
        while path and path not in self.positions:
            path = path[: path.rindex("[")] if path.endswith("]") else path.rpartition(".")[0]
        return self.positions.get(path, (1, 1))

    def canonical(self) -> dict[str, Any]:
        """A stable JSON-able form: defaults filled in, key order fixed."""
        if isinstance(self.input, KafkaInput):
            source: dict[str, Any] = {
                "kafka": {
                    "topics": list(self.input.topics),
                    "group": self.input.group,
                    "start": self.input.start,
                }
            }
        else:
            source = {"http": {}}
        return {
            "input": source,
            "processors": [{p.kind: p.options} for p in self.processors],
            "outputs": {name: _output_canonical(o) for name, o in sorted(self.outputs.items())},
            "errors": {
                "dead_letter": {"topic": self.dead_letter.topic} if self.dead_letter else None
            },
        }

    def topics_read(self) -> set[str]:
        return set(self.input.topics) if isinstance(self.input, KafkaInput) else set()

    def topics_written(self) -> set[str]:
        out = {o.topic for o in self.outputs.values() if isinstance(o, KafkaOutput)}
        if self.dead_letter:
            out.add(self.dead_letter.topic)
        return out


def _output_canonical(output: Output) -> dict[str, Any]:
    if isinstance(output, KafkaOutput):
        return {"kafka": {"topic": output.topic}}
    if isinstance(output, BucketOutput):
        return {
            "bucket": {
                "prefix": output.prefix,
                "max_records": output.max_records,
                "max_age_seconds": output.max_age_seconds,
            }
        }
    return {"http": {"url": output.url, "timeout_seconds": output.timeout_seconds}}


# --- reading the text ---------------------------------------------------------------------


def _compose(text: str, problems: list[ConfigProblem]) -> yaml.Node | None:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(ConfigProblem(exc.lineno, exc.colno, "", f"JSON: {exc.msg}"))
            return None
        except RecursionError:
            problems.append(ConfigProblem(1, 1, "", f"nested deeper than {MAX_DEPTH} levels"))
            return None
        # Valid JSON: its tabs are only whitespace between tokens (a JSON string holds
        # none raw); PyYAML's YAML 1.1 refuses some there, a space takes the same column.
        text = text.replace("\t", " ")
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=_Loader)  # noqa: S506 (safe)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = exc.problem or exc.context or "not YAML"
        problems.append(ConfigProblem(line, column, "", f"YAML: {what}"))
        return None
    except yaml.YAMLError as exc:
        problems.append(ConfigProblem(1, 1, "", f"YAML: {exc}"))
        return None
    except RecursionError:
        problems.append(ConfigProblem(1, 1, "", f"nested deeper than {MAX_DEPTH} levels"))
        return None
    return node


class _Reader:
    """Walks the composed nodes, collecting problems and building the spec."""

    def __init__(self, problems: list[ConfigProblem], text: str) -> None:
        self.problems = problems
        self.lines = text.split("\n")
        self.seen: set[int] = set()
        self.positions: dict[str, tuple[int, int]] = {}
        self.constructor = yaml.constructor.SafeConstructor()

    # --- primitives

    def problem(self, node: yaml.Node, path: str, message: str) -> None:
        mark = node.start_mark
        self.problems.append(ConfigProblem(mark.line + 1, mark.column + 1, path, message))

    def visit(self, node: yaml.Node, path: str, depth: int) -> bool:
        """False (with a problem) for an alias or too deep a node."""
        self.positions.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if id(node) in self.seen:
            self.problem(node, path, "YAML aliases are not allowed in a pipeline configuration")
            return False
        self.seen.add(id(node))
        if depth > MAX_DEPTH:
            self.problem(node, path, f"nested deeper than {MAX_DEPTH} levels")
            return False
        return True

    def scalar(self, node: yaml.Node) -> Any:
        return self.constructor.construct_object(node, deep=True)

    def mapping(
        self, node: yaml.Node, path: str, allowed: tuple[str, ...] | None, what: str
    ) -> dict[str, tuple[yaml.Node, yaml.Node]] | None:
        """A mapping's entries (key text → (key node, value node)), problems for keys not
        `allowed` (None: any) or repeated; None (with a problem) when `node` is no mapping.
        An empty node (``key:`` with nothing) reads as an empty mapping."""
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            return {}
        if not isinstance(node, yaml.MappingNode):
            self.problem(node, path, f"{what} must be a mapping")
            return None
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            where = _join(path, str(key))
            if not isinstance(key, str) or key_node.tag != "tag:yaml.org,2002:str":
                self.problem(key_node, path, f"{what}: keys must be strings")
                continue
            if key in out:
                self.problem(key_node, where, f"{key!r} is repeated")
                continue
            if allowed is not None and key not in allowed:
                expected = f"expected one of {', '.join(allowed)}" if allowed else "none is taken"
                self.problem(key_node, where, f"unknown key {key!r} ({expected})")
                continue
            out[key] = (key_node, value_node)
            mark = value_node.start_mark
            self.positions.setdefault(where, (mark.line + 1, mark.column + 1))
        return out

    def string(self, node: yaml.Node, path: str, what: str, max_len: int = 4096) -> str | None:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            self.problem(node, path, f"{what} must be a string")
            return None
        value = node.value
        if not value:
            self.problem(node, path, f"{what} must not be empty")
            return None
        if len(value) > max_len:
            self.problem(node, path, f"{what} is longer than {max_len} characters")
            return None
        return str(value)

    def number(
        self,
        node: yaml.Node,
        path: str,
        what: str,
        low: float,
        high: float,
        integer: bool = False,
        low_open: bool = False,
    ) -> float | None:
        tags = ("tag:yaml.org,2002:int",) + (() if integer else ("tag:yaml.org,2002:float",))
        if not isinstance(node, yaml.ScalarNode) or node.tag not in tags:
            self.problem(node, path, f"{what} must be {'an integer' if integer else 'a number'}")
            return None
        value = self.scalar(node)
        if value != value or (value <= low if low_open else value < low) or value > high:
            bound = f"{'above' if low_open else 'at least'} {low:g}"
            self.problem(node, path, f"{what} must be {bound} and at most {high:g}")
            return None
        return float(value) if not integer else int(value)

    def topic(self, node: yaml.Node, path: str) -> str | None:
        name = self.string(node, path, "a topic name", 249)
        if name is not None and not _TOPIC.fullmatch(name):
            self.problem(
                node,
                path,
                f"{name!r} is not a topic name (1-249 of a-z A-Z 0-9 . _ -, not '.' or '..')",
            )
            return None
        return name

    def expression(self, node: yaml.Node, path: str) -> str | None:
        source = self.string(node, path, "an expression")
        if source is None:
            return None
        try:
            Expression(source)
        except ExpressionError as exc:
            line, column = _expression_position(node, exc.line, exc.column, self.lines)
            self.problems.append(ConfigProblem(line, column, path, exc.message))
            return None
        return source


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _expression_position(
    node: yaml.Node, line: int, column: int, lines: list[str]
) -> tuple[int, int]:
    """Where in the text (1-based) the expression's own line/column falls."""
    mark = node.start_mark
    style = getattr(node, "style", None)
    if style in ("|", ">"):
        # A block scalar: its text starts on the line after the indicator, every line
        # indented by the block's indentation (its first line's).
        start = mark.line + line  # 0-based line of the expression's `line`
        first = lines[mark.line + 1] if mark.line + 1 < len(lines) else ""
        return start + 1, len(first) - len(first.lstrip(" ")) + column
    if line == 1:
        return mark.line + 1, mark.column + column + (1 if style in ("'", '"') else 0)
    return mark.line + line, column


# --- the structure --------------------------------------------------------------------------

_TOP = ("input", "processors", "outputs", "errors")


def parse_config(text: str) -> PipelineSpec:
    """The pipeline that `text` (YAML or JSON) describes. Raises `ConfigError` with every
    problem found."""
    problems: list[ConfigProblem] = []
    if not isinstance(text, str):
        raise ConfigError([ConfigProblem(1, 1, "", "the configuration must be text")])
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            [ConfigProblem(1, 1, "", f"the configuration is {size} bytes, over {MAX_CONFIG_BYTES}")]
        )
    if not text.strip():
        raise ConfigError([ConfigProblem(1, 1, "", "the configuration is empty")])
    root = _compose(text, problems)
    if root is None:
        raise ConfigError(problems or [ConfigProblem(1, 1, "", "the configuration is empty")])
    reader = _Reader(problems, text)
    reader.visit(root, "", 0)
    top = reader.mapping(root, "", _TOP, "the configuration")
    if top is None:
        raise ConfigError(problems)
    for required in ("input", "outputs"):
        if required not in top:
            reader.problem(root, required, f"{required!r} is required")
    source = _input(reader, top["input"][1]) if "input" in top else None
    outputs = _outputs(reader, top["outputs"][1]) if "outputs" in top else None
    dead_letter = _errors(reader, top["errors"][1]) if "errors" in top else None
    processors: list[ProcessorSpec] = []
    if "processors" in top:
        names = _output_names(top["outputs"][1]) if "outputs" in top else None
        processors = _processors(reader, top["processors"][1], names)
    if outputs is not None and "outputs" in top:
        routed = any(p.kind == "route" for p in processors)
        if not routed and DEFAULT_OUTPUT not in outputs and outputs:
            reader.problem(
                top["outputs"][1],
                "outputs",
                f"no output is named {DEFAULT_OUTPUT!r} and no route sends records elsewhere",
            )
        if isinstance(source, KafkaInput):
            written = {o.topic for o in outputs.values() if isinstance(o, KafkaOutput)}
            if dead_letter:
                written.add(dead_letter.topic)
            for topic in sorted(written & set(source.topics)):
                reader.problem(
                    top["outputs"][1],
                    "outputs",
                    f"the pipeline would write to its own input topic {topic!r} (a loop)",
                )
    if problems or source is None or outputs is None:
        problems.sort(key=lambda p: (p.line, p.column))
        raise ConfigError(problems)
    return PipelineSpec(source, tuple(processors), outputs, dead_letter, text, reader.positions)


def _input(reader: _Reader, node: yaml.Node) -> KafkaInput | HttpInput | None:
    if not reader.visit(node, "input", 1):
        return None
    entries = reader.mapping(node, "input", ("kafka", "http"), "input")
    if entries is None:
        return None
    if len(entries) != 1:
        reader.problem(node, "input", "input needs exactly one of kafka, http")
        return None
    kind, (_, body) = next(iter(entries.items()))
    if not reader.visit(body, f"input.{kind}", 2):
        return None
    if kind == "http":
        return HttpInput() if reader.mapping(body, "input.http", (), "input.http") == {} else None
    fields = reader.mapping(body, "input.kafka", ("topics", "group", "start"), "input.kafka")
    if fields is None:
        return None
    topics: list[str] = []
    ok = True
    if "topics" not in fields:
        reader.problem(body, "input.kafka.topics", "'topics' is required")
        ok = False
    else:
        listed = fields["topics"][1]
        if not isinstance(listed, yaml.SequenceNode):
            reader.problem(listed, "input.kafka.topics", "topics must be a list of topic names")
            ok = False
        elif not listed.value:
            reader.problem(listed, "input.kafka.topics", "topics must name at least one topic")
            ok = False
        else:
            for i, item in enumerate(listed.value):
                where = f"input.kafka.topics[{i}]"
                name = reader.topic(item, where) if reader.visit(item, where, 4) else None
                if name is None:
                    ok = False
                elif name in topics:
                    reader.problem(item, where, f"topic {name!r} is listed twice")
                    ok = False
                else:
                    topics.append(name)
    group = None
    if "group" in fields:
        group = reader.string(fields["group"][1], "input.kafka.group", "group", 249)
        ok = ok and group is not None
    start = "earliest"
    if "start" in fields:
        value = reader.string(fields["start"][1], "input.kafka.start", "start")
        if value not in ("earliest", "latest"):
            if value is not None:
                reader.problem(
                    fields["start"][1], "input.kafka.start", "start must be earliest or latest"
                )
            ok = False
        else:
            start = value
    return KafkaInput(tuple(topics), group, start) if ok else None


def _outputs(reader: _Reader, node: yaml.Node) -> dict[str, Output] | None:
    if not reader.visit(node, "outputs", 1):
        return None
    entries = reader.mapping(node, "outputs", None, "outputs")
    if entries is None:
        return None
    if not entries:
        reader.problem(node, "outputs", "outputs must name at least one output")
        return None
    if len(entries) > MAX_OUTPUTS:
        reader.problem(node, "outputs", f"more than {MAX_OUTPUTS} outputs")
        return None
    out: dict[str, Output] = {}
    ok = True
    for name, (key_node, body) in entries.items():
        where = f"outputs.{name}"
        if not _OUTPUT_NAME.fullmatch(name):
            reader.problem(
                key_node,
                where,
                f"{name!r} is not an output name (a letter or _, then 0-63 of "
                "letters, digits, _ and -)",
            )
            ok = False
            continue
        output = _output(reader, body, where) if reader.visit(body, where, 2) else None
        if output is None:
            ok = False
        else:
            out[name] = output
    return out if ok else None


def _output_names(node: yaml.Node) -> frozenset[str] | None:
    """The names the outputs mapping gives, valid outputs or not (routes name them)."""
    if not isinstance(node, yaml.MappingNode):
        return None
    return frozenset(k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode))


def _output(reader: _Reader, node: yaml.Node, path: str) -> Output | None:
    entries = reader.mapping(node, path, ("kafka", "bucket", "http"), "an output")
    if entries is None:
        return None
    if len(entries) != 1:
        reader.problem(node, path, "an output needs exactly one of kafka, bucket, http")
        return None
    kind, (_, body) = next(iter(entries.items()))
    where = f"{path}.{kind}"
    if not reader.visit(body, where, 3):
        return None
    if kind == "kafka":
        return _kafka_output(reader, body, where)
    if kind == "bucket":
        fields = reader.mapping(body, where, ("prefix", "max_records", "max_age_seconds"), kind)
        if fields is None:
            return None
        if "prefix" not in fields:
            reader.problem(body, f"{where}.prefix", "'prefix' is required")
            return None
        prefix = reader.string(fields["prefix"][1], f"{where}.prefix", "prefix", 512)
        if prefix is not None and (
            prefix.startswith("/") or ".." in prefix.split("/") or "\\" in prefix
        ):
            reader.problem(
                fields["prefix"][1], f"{where}.prefix", "prefix must be relative, without '..'"
            )
            prefix = None
        max_records: float | None = 10_000
        if "max_records" in fields:
            max_records = reader.number(
                fields["max_records"][1], f"{where}.max_records", "max_records", 1, 1_000_000, True
            )
        max_age: float | None = 60.0
        if "max_age_seconds" in fields:
            max_age = reader.number(
                fields["max_age_seconds"][1],
                f"{where}.max_age_seconds",
                "max_age_seconds",
                0,
                3600,
                low_open=True,
            )
        if prefix is None or max_records is None or max_age is None:
            return None
        return BucketOutput(prefix, int(max_records), float(max_age))
    fields = reader.mapping(body, where, ("url", "timeout_seconds"), kind)
    if fields is None:
        return None
    if "url" not in fields:
        reader.problem(body, f"{where}.url", "'url' is required")
        return None
    url = reader.string(fields["url"][1], f"{where}.url", "url", 2048)
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            reader.problem(fields["url"][1], f"{where}.url", "url must be an http(s) URL")
            url = None
    timeout: float | None = 5.0
    if "timeout_seconds" in fields:
        timeout = reader.number(
            fields["timeout_seconds"][1],
            f"{where}.timeout_seconds",
            "timeout_seconds",
            0,
            300,
            low_open=True,
        )
    if url is None or timeout is None:
        return None
    return HttpOutput(url, float(timeout))


def _kafka_output(reader: _Reader, node: yaml.Node, path: str) -> KafkaOutput | None:
    fields = reader.mapping(node, path, ("topic",), "kafka")
    if fields is None:
        return None
    if "topic" not in fields:
        reader.problem(node, f"{path}.topic", "'topic' is required")
        return None
    topic = reader.topic(fields["topic"][1], f"{path}.topic")
    return KafkaOutput(topic) if topic is not None else None


def _errors(reader: _Reader, node: yaml.Node) -> KafkaOutput | None:
    if not reader.visit(node, "errors", 1):
        return None
    fields = reader.mapping(node, "errors", ("dead_letter",), "errors")
    if not fields or "dead_letter" not in fields:
        return None
    body = fields["dead_letter"][1]
    if not reader.visit(body, "errors.dead_letter", 2):
        return None
    return _kafka_output(reader, body, "errors.dead_letter")


# --- processors --------------------------------------------------------------------------


def _processors(
    reader: _Reader, node: yaml.Node, outputs: frozenset[str] | None
) -> list[ProcessorSpec]:
    if not reader.visit(node, "processors", 1):
        return []
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        return []
    if not isinstance(node, yaml.SequenceNode):
        reader.problem(node, "processors", "processors must be a list")
        return []
    if len(node.value) > MAX_PROCESSORS:
        reader.problem(node, "processors", f"more than {MAX_PROCESSORS} processors")
        return []
    out = []
    for i, item in enumerate(node.value):
        where = f"processors[{i}]"
        if not reader.visit(item, where, 2):
            continue
        if not isinstance(item, yaml.MappingNode) or len(item.value) != 1:
            reader.problem(
                item, where, f"a processor is a mapping of one key, its kind ({', '.join(KINDS)})"
            )
            continue
        key_node, body = item.value[0]
        kind = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if kind not in KINDS:
            reader.problem(
                key_node, where, f"unknown processor {kind!r} (one of {', '.join(KINDS)})"
            )
            continue
        path = f"{where}.{kind}"
        if not reader.visit(body, path, 3):
            continue
        options = KINDS[kind](reader, body, path, outputs)
        if options is not None:
            mark = key_node.start_mark
            out.append(ProcessorSpec(kind, options, i, mark.line + 1, mark.column + 1))
    return out


def _no_options(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    return {} if reader.mapping(node, path, (), "its options") == {} else None


def _expression_option(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    return reader.expression(node, path)


def _field_path(reader: _Reader, node: yaml.Node, path: str) -> str | None:
    name = reader.string(node, path, "a field", 1024)
    if name is not None and "" in name.split("."):
        reader.problem(node, path, f"{name!r} is not a field path (names joined by '.')")
        return None
    return name


def _set(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    fields = reader.mapping(node, path, None, "set")
    if fields is None:
        return None
    if not fields:
        reader.problem(node, path, "set needs at least one field")
        return None
    out = {}
    for name, (key_node, body) in fields.items():
        where = f"{path}.{name}"
        if _field_path(reader, key_node, where) is None:
            continue
        if reader.visit(body, where, 4) and (source := reader.expression(body, where)):
            out[name] = source
    return out if len(out) == len(fields) else None


def _remove(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if isinstance(node, yaml.SequenceNode) and not items:
        reader.problem(node, path, "remove needs at least one field")
        return None
    out = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]" if isinstance(node, yaml.SequenceNode) else path
        if item is node or reader.visit(item, where, 4):
            name = _field_path(reader, item, where)
            if name is not None:
                out.append(name)
    return out if len(out) == len(items) else None


def _targets(
    reader: _Reader, node: yaml.Node, path: str, outputs: frozenset[str] | None
) -> list[str] | None:
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    names = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]" if isinstance(node, yaml.SequenceNode) else path
        name = reader.string(item, where, "an output name", 64)
        if name is None:
            return None
        if outputs is not None and name not in outputs:
            reader.problem(item, where, f"no output is named {name!r}")
            return None
        names.append(name)
    return names


def _route(reader: _Reader, node: yaml.Node, path: str, outputs: frozenset[str] | None) -> Any:
    if isinstance(node, yaml.ScalarNode):
        source = reader.expression(node, path)
        return {"expression": source} if source else None
    fields = reader.mapping(node, path, ("cases", "default"), "route")
    if fields is None:
        return None
    if "cases" not in fields:
        reader.problem(node, f"{path}.cases", "'cases' is required (or give one expression)")
        return None
    cases_node = fields["cases"][1]
    if not isinstance(cases_node, yaml.SequenceNode) or not cases_node.value:
        reader.problem(cases_node, f"{path}.cases", "cases must be a non-empty list")
        return None
    cases = []
    ok = True
    for i, case in enumerate(cases_node.value):
        where = f"{path}.cases[{i}]"
        entries = reader.mapping(case, where, ("when", "output"), "a case")
        if entries is None:
            ok = False
            continue
        for needed in ("when", "output"):
            if needed not in entries:
                reader.problem(case, f"{where}.{needed}", f"{needed!r} is required")
                ok = False
        if "when" in entries and "output" in entries:
            when = reader.expression(entries["when"][1], f"{where}.when")
            targets = _targets(reader, entries["output"][1], f"{where}.output", outputs)
            if when is None or targets is None:
                ok = False
            else:
                cases.append({"when": when, "output": targets})
    default: list[str] | None = [DEFAULT_OUTPUT]
    if "default" in fields:
        default_node = fields["default"][1]
        if isinstance(default_node, yaml.SequenceNode) and not default_node.value:
            default = []
        else:
            default = _targets(reader, default_node, f"{path}.default", outputs)
    elif outputs is not None and DEFAULT_OUTPUT not in outputs:
        reader.problem(
            node,
            f"{path}.default",
            f"records no case matches go to {DEFAULT_OUTPUT!r}, and no output is named so "
            "(give default: an output, or [] to drop them)",
        )
        default = None
    if not ok or default is None:
        return None
    return {"cases": cases, "default": default}


def _encode_avro(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    fields = reader.mapping(node, path, ("subject",), "encode_avro")
    if fields is None:
        return None
    if "subject" not in fields:
        reader.problem(node, f"{path}.subject", "'subject' is required (the schema's subject)")
        return None
    subject = reader.string(fields["subject"][1], f"{path}.subject", "subject", 512)
    return {"subject": subject} if subject else None


def _rate_limit(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    fields = reader.mapping(node, path, ("records_per_second", "burst"), "rate_limit")
    if fields is None:
        return None
    if "records_per_second" not in fields:
        reader.problem(node, f"{path}.records_per_second", "'records_per_second' is required")
        return None
    rate = reader.number(
        fields["records_per_second"][1],
        f"{path}.records_per_second",
        "records_per_second",
        0,
        10_000_000,
        low_open=True,
    )
    burst: float | None = None
    if "burst" in fields:
        burst = reader.number(fields["burst"][1], f"{path}.burst", "burst", 1, 10_000_000, True)
        if burst is None:
            return None
    if rate is None:
        return None
    return {"records_per_second": rate, "burst": int(burst) if burst else max(1, int(rate))}


def _dedupe(reader: _Reader, node: yaml.Node, path: str, outputs: Any) -> Any:
    fields = reader.mapping(node, path, ("key", "window_seconds", "max_keys"), "dedupe")
    if fields is None:
        return None
    ok = True
    for needed in ("key", "window_seconds"):
        if needed not in fields:
            reader.problem(node, f"{path}.{needed}", f"{needed!r} is required")
            ok = False
    if not ok:
        return None
    key = reader.expression(fields["key"][1], f"{path}.key")
    window = reader.number(
        fields["window_seconds"][1],
        f"{path}.window_seconds",
        "window_seconds",
        0,
        7 * 86400,
        low_open=True,
    )
    max_keys: float | None = 100_000
    if "max_keys" in fields:
        max_keys = reader.number(
            fields["max_keys"][1], f"{path}.max_keys", "max_keys", 1, 10_000_000, True
        )
    if key is None or window is None or max_keys is None:
        return None
    return {"key": key, "window_seconds": window, "max_keys": int(max_keys)}


KINDS: dict[str, Any] = {
    "parse_json": _no_options,
    "encode_json": _no_options,
    "parse_avro": _no_options,
    "encode_avro": _encode_avro,
    "map": _expression_option,
    "set": _set,
    "remove": _remove,
    "filter": _expression_option,
    "route": _route,
    "key": _expression_option,
    "rate_limit": _rate_limit,
    "dedupe": _dedupe,
}
