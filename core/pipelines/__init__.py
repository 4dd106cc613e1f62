"""Managed data pipelines' engine: a configuration (YAML or JSON) parsed with every
problem at its line and column, its processors compiled, records run through them.
Pure: no Django, no agent; the agents' `pipelines` role runs it, the control plane
validates and dry-runs with it. docs/PIPELINES.md describes the configuration."""

from core.pipelines.config import (
    DEAD_LETTER,
    DEFAULT_OUTPUT,
    BucketOutput,
    ConfigError,
    ConfigProblem,
    HttpInput,
    HttpOutput,
    KafkaInput,
    KafkaOutput,
    PipelineSpec,
    ProcessorSpec,
    parse_config,
)
from core.pipelines.dry_run import dry_run, render_bytes
from core.pipelines.engine import CompiledPipeline, compile_spec, dead_letter_record
from core.pipelines.records import Emit, InRecord, RecordError, SchemaSource

__all__ = [
    "DEAD_LETTER",
    "DEFAULT_OUTPUT",
    "BucketOutput",
    "CompiledPipeline",
    "ConfigError",
    "ConfigProblem",
    "Emit",
    "HttpInput",
    "HttpOutput",
    "InRecord",
    "KafkaInput",
    "KafkaOutput",
    "PipelineSpec",
    "ProcessorSpec",
    "RecordError",
    "SchemaSource",
    "compile_spec",
    "dead_letter_record",
    "dry_run",
    "parse_config",
    "render_bytes",
]
