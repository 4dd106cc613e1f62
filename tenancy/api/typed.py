"""DRF's serializer bases, parameterized for the type checker: djangorestframework-stubs
makes them generic (over the instance they serialize), DRF's own classes are not at run
time, so the apps checked with `disallow_any_generics` subclass these names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import serializers

if TYPE_CHECKING:
    Serializer = serializers.Serializer[Any]
    ModelSerializer = serializers.ModelSerializer[Any]
else:
    Serializer = serializers.Serializer
    ModelSerializer = serializers.ModelSerializer

__all__ = ["ModelSerializer", "Serializer"]
