"""REST API for operators' tools: where a record's bytes are (`floe diagnose-record`) and
the files the store knows (`floe file-scrubber`)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from metadata_store.models import Partition
from tenancy.api.pagination import query_params
from tenancy.api.typed import Serializer
from virtualclusters import file_index
from virtualclusters.api.views import ClusterScopedView

FILES_PAGE_MAX = 1000


class LocateQuerySerializer(Serializer):
    offset = serializers.IntegerField(min_value=0, help_text="The record's offset.")


class RecordLocationSerializer(Serializer):
    topic = serializers.CharField()
    topic_id = serializers.UUIDField()
    partition = serializers.IntegerField()
    offset = serializers.IntegerField()
    log_start_offset = serializers.IntegerField()
    high_watermark = serializers.IntegerField()
    file_key = serializers.CharField(help_text="The object's key in the cluster's bucket.")
    file_state = serializers.CharField(help_text="live, or replaced (awaiting deletion).")
    file_size = serializers.IntegerField()
    file_level = serializers.IntegerField(help_text="0: as agents wrote it; 1+: compacted.")
    position = serializers.IntegerField(help_text="The run's first byte in the file.")
    length = serializers.IntegerField(help_text="The run's bytes.")
    base_offset = serializers.IntegerField(help_text="The run's first offset.")
    last_offset = serializers.IntegerField()
    record_count = serializers.IntegerField()
    batch_count = serializers.IntegerField()
    max_timestamp = serializers.IntegerField()
    rewrite = serializers.BooleanField(
        help_text="The batches carry producers' base offsets (level 0): a reader numbers "
        "them densely from the run's base offset."
    )


class FilesQuerySerializer(Serializer):
    after = serializers.CharField(
        required=False, default="", help_text="The last key of the previous page."
    )
    limit = serializers.IntegerField(
        required=False, default=FILES_PAGE_MAX, min_value=1, max_value=FILES_PAGE_MAX
    )


class KnownFileSerializer(Serializer):
    key = serializers.CharField()
    state = serializers.CharField()
    size = serializers.IntegerField()
    level = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class KnownFilesPageSerializer(Serializer):
    files = KnownFileSerializer(many=True)
    next_after = serializers.CharField(
        allow_null=True, help_text="Pass as ?after= for the next page; null: the last page."
    )
    prefix = serializers.CharField(help_text="Where the cluster's objects lie in the bucket.")
    spared_prefixes = serializers.ListField(
        child=serializers.CharField(),
        help_text="Objects under these are no orphans though no file names them (agents' "
        "journals, outputs of running jobs).",
    )
    orphan_grace_s = serializers.IntegerField(
        help_text="How long an object no file names is left alone before it counts as orphan."
    )


class RecordLocateView(ClusterScopedView):
    @extend_schema(
        parameters=[LocateQuerySerializer],
        responses={
            200: RecordLocationSerializer,
            404: OpenApiResponse(description="No such topic or partition, or no run holds it."),
        },
        summary="Locate a record: the committed run (file, byte range, base offset) holding "
        "an offset",
    )
    def get(self, request: Request, cluster_id: str, name: str, partition: int) -> Response:
        cluster = self.cluster(cluster_id)
        offset = query_params(request, LocateQuerySerializer)["offset"]
        try:
            found = file_index.record_locate(
                cluster, topic=name, partition=partition, offset=offset
            )
        except Partition.DoesNotExist:
            raise NotFound(f"no partition {partition} of a topic {name!r}") from None
        except file_index.OffsetNotStored as exc:
            raise NotFound(str(exc)) from None
        part, run, file = found.partition, found.run, found.file
        return Response(
            RecordLocationSerializer(
                {
                    "topic": name,
                    "topic_id": part.topic_id,
                    "partition": partition,
                    "offset": offset,
                    "log_start_offset": part.log_start_offset,
                    "high_watermark": part.high_watermark,
                    "file_key": file.key,
                    "file_state": file.state,
                    "file_size": file.size,
                    "file_level": file.level,
                    "position": run.position,
                    "length": run.length,
                    "base_offset": run.base_offset,
                    "last_offset": run.last_offset,
                    "record_count": run.record_count,
                    "batch_count": run.batch_count,
                    "max_timestamp": run.max_timestamp,
                    "rewrite": file.level == 0,
                }
            ).data
        )


class KnownFileListView(ClusterScopedView):
    @extend_schema(
        parameters=[FilesQuerySerializer],
        responses=KnownFilesPageSerializer,
        summary="List the files the metadata store knows, by key (keyset pages of up to "
        "1000), with what an orphan scan must spare",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        query = query_params(request, FilesQuerySerializer)
        files = list(
            file_index.known_files_page(cluster, after=query["after"], limit=query["limit"])
        )
        return Response(
            KnownFilesPageSerializer(
                {
                    "files": files,
                    "next_after": files[-1].key if len(files) == query["limit"] else None,
                    "prefix": f"{cluster.public_id}/",
                    "spared_prefixes": file_index.unknown_objects_spared(cluster),
                    "orphan_grace_s": file_index.orphan_grace_s(),
                }
            ).data
        )
