"""REST API: consumer groups of a cluster — members, assignments and lag; deletion."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from tenancy.api.pagination import PAGE_PARAMETERS
from tenancy.api.typed import Serializer
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.groups.lag import groups_describe
from virtualclusters.groups.services import GroupNotEmpty, group_delete


class GroupConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The group has active members."
    default_code = "non_empty_group"


class AssignmentSerializer(Serializer):
    topic = serializers.CharField()
    partitions = serializers.ListField(child=serializers.IntegerField())


class GroupMemberSerializer(Serializer):
    member_id = serializers.CharField()
    group_instance_id = serializers.CharField(allow_null=True)
    client_id = serializers.CharField(allow_blank=True)
    client_host = serializers.CharField(allow_blank=True)
    assignment = AssignmentSerializer(
        many=True,
        help_text="The partitions it was given (KIP-848: those it may own now; it owns them "
        "once it heartbeats them).",
    )
    member_epoch = serializers.IntegerField(
        required=False, allow_null=True, help_text="KIP-848 groups: the member's epoch."
    )
    target_assignment = AssignmentSerializer(
        many=True,
        required=False,
        allow_null=True,
        help_text="KIP-848 groups: the partitions the coordinator is moving it to.",
    )


class GroupPartitionSerializer(Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    committed_offset = serializers.IntegerField(
        allow_null=True, help_text="Null when the group never committed this partition."
    )
    high_watermark = serializers.IntegerField(allow_null=True)
    lag = serializers.IntegerField(allow_null=True, help_text="High watermark − committed.")
    lag_seconds = serializers.FloatField(
        allow_null=True,
        help_text="Now − the max timestamp of the batch holding the committed offset "
        "(how old the next record to read is); 0 when caught up.",
    )
    committed_at = serializers.DateTimeField(allow_null=True)
    member_id = serializers.CharField(allow_null=True, help_text="The member assigned it.")
    client_id = serializers.CharField(allow_null=True)


class GroupSerializer(Serializer):
    group_id = serializers.CharField()
    state = serializers.CharField(
        help_text="Empty, PreparingRebalance, CompletingRebalance or Stable."
    )
    protocol_type = serializers.CharField(allow_blank=True)
    group_type = serializers.CharField(
        help_text="classic (JoinGroup/SyncGroup, the client assigns) or consumer (KIP-848, "
        "group.protocol=consumer: the coordinator assigns)."
    )
    protocol = serializers.CharField(allow_blank=True, help_text="The assignor in use.")
    generation = serializers.IntegerField(
        allow_null=True, help_text="The generation (KIP-848 groups: the group epoch)."
    )
    assignment_epoch = serializers.IntegerField(
        allow_null=True, help_text="KIP-848 groups: the epoch of the target assignment."
    )
    coordinator = serializers.CharField(
        allow_null=True, help_text="Id of the agent coordinating the group."
    )
    members = GroupMemberSerializer(many=True)
    partitions = GroupPartitionSerializer(many=True)
    total_lag = serializers.IntegerField()
    max_lag_seconds = serializers.FloatField()


class GroupListView(ClusterScopedView):
    @extend_schema(
        responses=GroupSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List consumer groups and lag",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        groups = list(groups_describe(self.cluster(cluster_id)))
        return self.paginated(groups, GroupSerializer)


class GroupDetailView(ClusterScopedView):
    @extend_schema(responses=GroupSerializer, summary="Describe a consumer group and its lag")
    def get(self, request: Request, cluster_id: str, group_id: str) -> Response:
        found = groups_describe(self.cluster(cluster_id), [group_id])
        if not found:
            raise Http404
        return Response(GroupSerializer(found[0]).data)

    @extend_schema(
        responses={204: None},
        summary="Delete a consumer group and its committed offsets (no active members)",
    )
    def delete(self, request: Request, cluster_id: str, group_id: str) -> Response:
        try:
            deleted = group_delete(cluster=self.cluster(cluster_id), group_id=group_id)
        except GroupNotEmpty as exc:
            raise GroupConflict(str(exc)) from None
        if not deleted:
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
