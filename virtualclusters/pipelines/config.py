"""A configuration checked for a cluster: the engine's parse (`core.pipelines.parse_config`:
syntax, structure, expressions), then what only the cluster can say — every topic it
reads or writes exists, none is both read and written (a loop), none it writes is a
migration's mirror (read-only until cut over). Every problem has its line and column."""

from __future__ import annotations

from core.pipelines import (
    ConfigError,
    ConfigProblem,
    KafkaInput,
    KafkaOutput,
    PipelineSpec,
    parse_config,
)
from metadata_store.models import Topic
from virtualclusters.models import VirtualCluster

MAX_CONFIG_CHARS = 256 * 1024


# The engine's problem (line, column, path, message), for what only the cluster can say too.
Problem = ConfigProblem


class ConfigInvalid(ValueError):
    """The configuration has problems (every one found, each at its line)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"line {p.line}: {p.message}" for p in problems[:3]))
        self.problems = problems


def _topics_named(spec: PipelineSpec) -> list[tuple[str, str, bool]]:
    """(path, topic, written) for every topic the configuration names."""
    found: list[tuple[str, str, bool]] = []
    if isinstance(spec.input, KafkaInput):
        for index, topic in enumerate(spec.input.topics):
            found.append((f"input.kafka.topics[{index}]", topic, False))
    for name, output in spec.outputs.items():
        if isinstance(output, KafkaOutput):
            found.append((f"outputs.{name}.kafka.topic", output.topic, True))
    if spec.dead_letter is not None:
        found.append(("errors.dead_letter.topic", spec.dead_letter.topic, True))
    return found


def config_check(cluster: VirtualCluster, text: str) -> PipelineSpec:
    """The configuration's spec, or `ConfigInvalid` with every problem found."""
    if len(text) > MAX_CONFIG_CHARS:
        raise ConfigInvalid(
            [Problem(1, 1, "", f"a configuration is at most {MAX_CONFIG_CHARS} characters")]
        )
    if "\0" in text:
        raise ConfigInvalid([Problem(1, 1, "", "a configuration cannot contain NUL")])
    try:
        spec = parse_config(text)
    except ConfigError as exc:
        raise ConfigInvalid(list(exc.problems) or [Problem(1, 1, "", str(exc))]) from None
    named = _topics_named(spec)
    rows = {
        t.name: t
        for t in Topic.objects.filter(cluster=cluster, name__in={n for _, n, _ in named}).only(
            "name", "mirrored_by"
        )
    }
    read = {topic for _, topic, written in named if not written}
    problems: list[Problem] = []
    for path, topic, written in named:
        message = None
        if topic not in rows:
            message = f"the cluster has no topic {topic!r}: create it first"
        elif written and topic in read:
            message = f"topic {topic!r} is both read and written: the pipeline would loop"
        elif written and rows[topic].mirrored_by:
            message = (
                f"topic {topic!r} is mirrored by migration {rows[topic].mirrored_by}: "
                "it is read-only until cut over"
            )
        if message:
            line, column = spec.position_of(path)
            problems.append(Problem(line, column, path, message))
    if problems:
        raise ConfigInvalid(problems)
    return spec
