"""Request bodies that say what they take and take only that: a field the serializer
does not know is a 400 naming it (``partitions`` for ``num_partitions`` is not silently
ignored), and a value must already have its JSON type (``0`` is not ``false``, ``0`` is
not ``"0"``), as the schema says."""

from __future__ import annotations

from collections.abc import Mapping

from rest_framework import serializers


def _json_type_problem(field: serializers.Field, value) -> str | None:
    if value is None:
        return None  # allow_null decides
    if isinstance(field, serializers.BooleanField):
        ok = isinstance(value, bool)
    elif isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(field, serializers.FloatField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(field, serializers.CharField | serializers.ChoiceField):
        ok = isinstance(value, str)
    elif isinstance(field, serializers.DictField):
        ok = isinstance(value, dict)
        if ok and isinstance(field.child, serializers.CharField):
            nullable = field.child.allow_null
            if not all(isinstance(v, str) or (v is None and nullable) for v in value.values()):
                return "Must be a JSON object of strings."
    elif isinstance(field, serializers.ListField):
        ok = isinstance(value, list)
        if ok and field.child is not None:  # each item its own JSON type too
            for item in value:
                problem = _json_type_problem(field.child, item)
                if problem:
                    return f"Each item: {problem[0].lower()}{problem[1:]}"
    else:
        return None
    return None if ok else f"Must be a JSON {_type_name(field)}."


def _type_name(field: serializers.Field) -> str:
    for kind, name in (
        (serializers.BooleanField, "boolean (true or false)"),
        (serializers.IntegerField, "integer"),
        (serializers.FloatField, "number"),
        (serializers.CharField, "string"),
        (serializers.ChoiceField, "string"),
        (serializers.DictField, "object"),
        (serializers.ListField, "array"),
    ):
        if isinstance(field, kind):
            return name
    return "value"


class StrictSerializer(serializers.Serializer):
    # A request serializer that refuses unknown fields and values of another JSON type
    # (the schema says `additionalProperties: false` for it too: controlplane.api.schema).
    # No docstring: the schema would show it as the description of every request body.

    def to_internal_value(self, data):
        for field in self.fields.values():
            # Lengths count what was sent (the schema's maxLength); services trim names.
            if isinstance(field, serializers.CharField):
                field.trim_whitespace = False
        if isinstance(data, Mapping):
            errors = {name: ["Unknown field."] for name in sorted(set(data) - set(self.fields))}
            for name, field in self.fields.items():
                problem = _json_type_problem(field, data[name]) if name in data else None
                if problem:
                    errors[name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)
