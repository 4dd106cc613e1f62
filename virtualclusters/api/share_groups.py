"""REST API: share groups (KIP-932) of a cluster — members, each partition's start offset,
records in flight and lag; resetting and deleting offsets, deleting a group."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from tenancy.api.pagination import PAGE_PARAMETERS
from tenancy.api.typed import Serializer
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.groups.share import (
    RESET_TO,
    ShareGroupMissing,
    ShareGroupNotEmpty,
    share_group_delete,
    share_groups_describe,
    share_offsets_forget,
    share_offsets_reset,
)


class ShareGroupConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The share group has active members."
    default_code = "non_empty_group"


@contextmanager
def _share_errors() -> Iterator[None]:
    """The services' refusals as HTTP answers: no such group 404, a group with active
    members 409, a bad reset 400."""
    try:
        yield
    except ShareGroupMissing:
        raise Http404 from None
    except ShareGroupNotEmpty as exc:
        raise ShareGroupConflict(str(exc)) from None
    except ValueError as exc:
        raise ValidationError({"non_field_errors": [str(exc)]}) from None


class ShareAssignmentSerializer(Serializer):
    topic = serializers.CharField()
    partitions = serializers.ListField(child=serializers.IntegerField())


class ShareMemberSerializer(Serializer):
    member_id = serializers.CharField()
    client_id = serializers.CharField(allow_blank=True)
    client_host = serializers.CharField(allow_blank=True)
    agent_id = serializers.CharField(
        allow_blank=True, help_text="The agent its last heartbeat went to."
    )
    member_epoch = serializers.IntegerField()
    subscribed_topics = serializers.ListField(child=serializers.CharField())
    assignment = ShareAssignmentSerializer(
        many=True,
        help_text="Every partition of its subscribed topics: a share group's members read "
        "the same partitions, record by record.",
    )


class SharePartitionSerializer(Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    start_offset = serializers.IntegerField(
        help_text="Every record below it is done with (acknowledged or archived)."
    )
    high_watermark = serializers.IntegerField()
    in_flight = serializers.IntegerField(
        help_text="Records from the start offset on acquired at least once, not done with."
    )
    locked = serializers.IntegerField(help_text="Of those, locked to a member now.")
    available = serializers.IntegerField(help_text="Of those, released or lock expired.")
    lag = serializers.IntegerField(
        help_text="Records from the start offset to the high watermark not done with (KIP-1226)."
    )


class ShareGroupSerializer(Serializer):
    group_id = serializers.CharField()
    state = serializers.CharField(help_text="Stable (live members) or Empty.")
    group_epoch = serializers.IntegerField()
    members = ShareMemberSerializer(many=True)
    partitions = SharePartitionSerializer(many=True)
    total_lag = serializers.IntegerField()
    locked = serializers.IntegerField(help_text="Records locked to members, all partitions.")


class ShareOffsetsResetSerializer(Serializer):
    topic = serializers.CharField(max_length=249)
    to = serializers.ChoiceField(
        choices=RESET_TO,
        help_text="earliest: the log start; latest: the high watermark (only records "
        "written from now on); offset: `offset`, kept within the partition's records.",
    )
    offset = serializers.IntegerField(required=False, min_value=0)
    partitions = serializers.ListField(
        child=serializers.IntegerField(min_value=0),
        required=False,
        help_text="The partitions to reset; every partition of the topic when left out.",
    )


class ShareOffsetsDeleteSerializer(Serializer):
    topic = serializers.CharField(max_length=249)


class ShareGroupListView(ClusterScopedView):
    @extend_schema(
        responses=ShareGroupSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List share groups (KIP-932): members, start offsets, records in flight, lag",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        groups = share_groups_describe(self.cluster(cluster_id))
        return self.paginated(groups, ShareGroupSerializer)


def _described(view: ClusterScopedView, cluster_id: str, group_id: str) -> Response:
    found = share_groups_describe(view.cluster(cluster_id), [group_id])
    if not found:
        raise Http404
    return Response(ShareGroupSerializer(found[0]).data)


class ShareGroupDetailView(ClusterScopedView):
    @extend_schema(responses=ShareGroupSerializer, summary="Describe a share group")
    def get(self, request: Request, cluster_id: str, group_id: str) -> Response:
        return _described(self, cluster_id, group_id)

    @extend_schema(
        responses={204: None},
        summary="Delete a share group, its configs and offsets (no active members)",
    )
    def delete(self, request: Request, cluster_id: str, group_id: str) -> Response:
        with _share_errors():
            share_group_delete(cluster=self.cluster(cluster_id), group_id=group_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ShareOffsetsResetView(ClusterScopedView):
    @extend_schema(
        request=ShareOffsetsResetSerializer,
        responses=ShareGroupSerializer,
        summary="Reset a share group's start offsets of a topic (no active members)",
    )
    def post(self, request: Request, cluster_id: str, group_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = ShareOffsetsResetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with _share_errors():
            share_offsets_reset(cluster=cluster, group_id=group_id, **data.validated_data)
        return _described(self, cluster_id, group_id)


class ShareOffsetsDeleteView(ClusterScopedView):
    @extend_schema(
        request=ShareOffsetsDeleteSerializer,
        responses=ShareGroupSerializer,
        summary="Delete a share group's offsets of a topic (no active members): its next "
        "fetch starts where share.auto.offset.reset says",
    )
    def post(self, request: Request, cluster_id: str, group_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = ShareOffsetsDeleteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with _share_errors():
            share_offsets_forget(cluster=cluster, group_id=group_id, **data.validated_data)
        return _described(self, cluster_id, group_id)
