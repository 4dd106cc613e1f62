"""What every app's REST views share: the organization-scoped base view, and a 201 with
its ``Location``."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy.api.pagination import HeaderPagination


def created(data, url_name: str, **kwargs) -> Response:
    """A 201 whose ``Location`` header names the new thing's URL."""
    return Response(
        data, status=status.HTTP_201_CREATED, headers={"Location": reverse(url_name, kwargs=kwargs)}
    )


class OrgScopedView(APIView):
    """Base view: every query goes through the caller's organization (deny by default)."""

    # Lists come in pages: ``return self.paginated(items, Serializer)``.
    pagination_class: type[HeaderPagination] | None = HeaderPagination

    @property
    def organization(self):
        return getattr(self.request.auth, "organization", None)

    def paginated(self, items, serializer_class) -> Response:
        """One page of ``items`` (a queryset or a list), serialized, with paging headers."""
        assert self.pagination_class is not None, "a view without pages lists whole"
        paginator = self.pagination_class()
        page: list | None = paginator.paginate_queryset(items, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)
