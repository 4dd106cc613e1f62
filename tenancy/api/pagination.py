"""Pages of REST lists: ``?limit=&offset=``; the body stays a JSON array, and the headers
say how many there are (``X-Total-Count``) and where the next page is (``Link``, RFC 8288).

``HeaderPagination`` is DRF's ``LimitOffsetPagination`` (counting, slicing and the next
link are its own) with two changes: a bad ``limit`` or ``offset`` is a 400 naming it (DRF
would quietly fall back to the default), and the page goes in headers rather than an
envelope. Every API view has it as its ``pagination_class`` (``OrgScopedView``).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class PageQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        help_text=f"At most this many items (default {DEFAULT_LIMIT}).",
    )
    offset = serializers.IntegerField(
        required=False, min_value=0, max_value=2**31, help_text="Skip this many items first."
    )


class KeyListQuerySerializer(serializers.Serializer):
    include_revoked = serializers.BooleanField(
        required=False, default=False, help_text="List revoked keys too."
    )


PAGE_PARAMETERS: list[OpenApiParameter | type[serializers.Serializer]] = [
    PageQuerySerializer,
    OpenApiParameter(
        "X-Total-Count",
        OpenApiTypes.INT,
        location=OpenApiParameter.HEADER,
        response=True,
        description="How many items the whole list has.",
    ),
    OpenApiParameter(
        "Link",
        OpenApiTypes.STR,
        location=OpenApiParameter.HEADER,
        response=True,
        description='`<url>; rel="next"` while there are more items.',
    ),
]


def query_params(request, serializer_class: type[serializers.Serializer]) -> dict:
    """The query's parameters, validated by ``serializer_class``. A parameter given with
    no value (``?limit=``), or given twice, is a 400 too: DRF would take it as absent, or the last."""
    names: list[str] = list(serializer_class().fields.keys())
    blank = [n for n in names if request.query_params.get(n, None) == ""]
    if blank:
        raise ValidationError({name: ["This parameter needs a value."] for name in blank})
    repeated = [n for n in names if len(request.query_params.getlist(n)) > 1]
    if repeated:
        raise ValidationError({name: ["Give this parameter once."] for name in repeated})
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query.validated_data


def page_bounds(request) -> tuple[int, int]:
    """``(limit, offset)`` from the query; a 400 naming the parameter when out of range."""
    query = query_params(request, PageQuerySerializer)
    return int(query.get("limit", DEFAULT_LIMIT)), int(query.get("offset", 0))


class HeaderPagination(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        limit, self._offset = page_bounds(request)  # validated once, for both
        return limit

    def get_offset(self, request) -> int:
        return self._offset

    def get_paginated_response(self, data) -> Response:
        response = Response(data, headers={"X-Total-Count": str(self.count)})
        next_link = self.get_next_link()
        if next_link is not None:
            response["Link"] = f'<{next_link}>; rel="next"'
        return response

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return schema  # a bare array; the headers are in PAGE_PARAMETERS

    def get_schema_operation_parameters(self, view) -> list:
        return []  # PAGE_PARAMETERS states limit and offset with their bounds
