"""Pages of REST lists: ``?limit=&offset=``; the body stays a JSON array, and the headers
say how many there are (``X-Total-Count``) and where the next page is (``Link``, RFC 8288).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

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


PAGE_PARAMETERS = [
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
    names = serializer_class().fields
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
    return query.get("limit", DEFAULT_LIMIT), query.get("offset", 0)


def paginated(request, items, serializer_class) -> Response:
    """One page of ``items`` (a queryset or a list), serialized, with paging headers."""
    limit, offset = page_bounds(request)
    total = items.count() if hasattr(items, "count") and not isinstance(items, list) else len(items)
    page = items[offset : offset + limit]
    response = Response(serializer_class(page, many=True).data)
    response["X-Total-Count"] = str(total)
    if offset + limit < total:
        url = replace_query_param(request.build_absolute_uri(), "offset", offset + limit)
        response["Link"] = f'<{replace_query_param(url, "limit", limit)}>; rel="next"'
    return response
