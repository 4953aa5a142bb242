# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Whole Kafka requests and responses: the request decoder and the response encoder over
the one registry of APIs (:data:`~brokerd.kafka.wire.requests.registry.SPECS`).

:func:`decode_request` turns a whole request frame into a :class:`Request`;
:func:`encode_response` turns a response message into a whole frame.
:func:`api_versions_fallback` is the version-0 reply to an ApiVersions request of a
version brokerd does not know. :data:`SUPPORTED_VERSIONS` is a view of the registry
(what ApiVersions advertises).

The message classes live in the modules of :mod:`brokerd.kafka.wire.messages`, one per
API family; the names of those not in a family of their own (not ACL, not SASL) are
re-exported here for the tests and tools that build messages of many families.

Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import attrs

from brokerd.kafka.wire.codec import (
    ApiKey,
    MalformedRequest,
    Reader,
    RequestHeader,
    Writer,
    encode_request_header,
    encode_struct,
    frame,
    is_flexible,
    peek_header,
    read_request_header,
    read_response_header,
    read_struct,
    response_frame,
    write_struct,
)
from brokerd.kafka.wire.messages.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from brokerd.kafka.wire.messages.configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from brokerd.kafka.wire.messages.fetch import (
    AbortedTransaction,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResponse,
    ForgottenTopic,
)
from brokerd.kafka.wire.messages.group_admin import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from brokerd.kafka.wire.messages.groups import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchTopic,
    OffsetFetchTopicResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from brokerd.kafka.wire.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)
from brokerd.kafka.wire.messages.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataTopic,
)
from brokerd.kafka.wire.messages.partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    DeleteRecordsPartition,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
    DeleteRecordsTopicResult,
    DescribableLogDirTopic,
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from brokerd.kafka.wire.messages.produce import (
    BatchIndexAndErrorMessage,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from brokerd.kafka.wire.messages.producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from brokerd.kafka.wire.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from brokerd.kafka.wire.messages.txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsState,
    DescribeTransactionsTopicData,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    ListTransactionsState,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from brokerd.kafka.wire.requests.registry import KEY_OF_RESPONSE, SPECS
from brokerd.kafka.wire.schema import AUTHORIZED_OPERATIONS_OMITTED, ApiSpec
from brokerd.net.frames import Frame

#: Advertised (and accepted) version ranges, from the registry.
SUPPORTED_VERSIONS: Mapping[ApiKey, tuple[int, int]] = MappingProxyType(
    {key: (spec.min_version, spec.max_version) for key, spec in SPECS.items()}
)

#: Every API key by its number (a look-up per request, cheaper than ``ApiKey(n)``).
_API_KEYS: Mapping[int, ApiKey] = MappingProxyType({int(key): key for key in ApiKey})

#: Highest ApiVersions version answered in the v0 fallback's single entry.
API_VERSIONS_MAX = SPECS[ApiKey.API_VERSIONS].max_version
#: The error code of the fallback (UNSUPPORTED_VERSION); kept here so the codec does not
#: depend on the error module.
_UNSUPPORTED_VERSION = 35
#: The error code of an ApiVersions v3+ request with a bad client software name or
#: version (INVALID_REQUEST).
_INVALID_REQUEST = 42
#: What Kafka accepts as ApiVersions v3+'s client software name and version: letters,
#: digits, '-' and '.', starting and ending with a letter or digit.
_CLIENT_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
#: First ApiVersions version that names the client software.
_CLIENT_SOFTWARE_FROM = 3
#: The error code of an ApiVersions v5+ request meant for another cluster or node
#: (REBOOTSTRAP_REQUIRED, KIP-1242).
_REBOOTSTRAP_REQUIRED = 129
#: First ApiVersions version that names the cluster and node the client means to reach.
_TARGET_FROM = 5


# -- top level -----------------------------------------------------------------------


class UnknownApiKey(MalformedRequest):
    """An API key brokerd does not implement (Kafka closes the connection)."""

    def __init__(self, api_key: int, correlation_id: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


class UnsupportedVersion(MalformedRequest):
    """A known API at a version outside the advertised range."""

    def __init__(self, api_key: ApiKey, api_version: int, correlation_id: int) -> None:
        lo, hi = SUPPORTED_VERSIONS[api_key]
        super().__init__(
            f"{api_key.name} version {api_version} is not supported (supported {lo}-{hi})"
        )
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


#: A request's body class.
B = TypeVar("B")


@attrs.frozen
class Request(Generic[B]):
    """A decoded request: its header and its body (an instance of its API's request
    class; ``Request[CreateTopicsRequest]`` is a decoded CreateTopics)."""

    header: RequestHeader
    body: B

    @property
    def api_key(self) -> ApiKey:
        # Asked several times per request (dispatch, metrics, ordering rules): a
        # dictionary look-up, not an Enum call.
        key = _API_KEYS.get(self.header.api_key)
        return ApiKey(self.header.api_key) if key is None else key

    @property
    def api_version(self) -> int:
        return self.header.api_version


#: A decoded request of any API: what the listener holds before the dispatch routes it to
#: its API's handler (which sees it as ``Request[ItsRequestClass]``).
AnyRequest = Request[Any]


def request_header_flexible(api_key: ApiKey, api_version: int) -> bool:
    """Whether the request uses header v2 (every flexible request version does)."""
    return is_flexible(SPECS[api_key].request, api_version)


def response_header_flexible(api_key: ApiKey, api_version: int) -> bool:
    """Whether the response uses header v1: flexible response versions do, except
    ApiVersions, whose response header is always v0 (a client that does not yet know the
    broker's versions must be able to read it)."""
    if api_key is ApiKey.API_VERSIONS:
        return False
    return is_flexible(SPECS[api_key].response, api_version)


def is_supported(api_key: int, api_version: int) -> bool:
    key = _API_KEYS.get(api_key)
    spec = None if key is None else SPECS.get(key)
    return spec is not None and spec.supports(api_version)


_Decoding = tuple[ApiKey, ApiSpec[Any, Any], bool]
#: Per (API key number, version) answered: the API, its spec and whether the request is
#: flexible, worked out on the first request of each (only supported pairs are kept).
_DECODING: dict[tuple[int, int], _Decoding] = {}
#: Per (response class, version) answered: whether the response header and the body are
#: flexible.
_ENCODING: dict[tuple[type[Any], int], tuple[bool, bool]] = {}


def _decoding(key: int, version: int, correlation: int) -> _Decoding:
    api = _API_KEYS.get(key)
    if api is None:
        raise UnknownApiKey(key, correlation)
    if not is_supported(api, version):
        # Checked before reading further: nothing is known of an unsupported version's
        # header (an ApiVersions of a later version is answered from these 8 bytes).
        raise UnsupportedVersion(api, version, correlation)
    plan = _DECODING[(key, version)] = (api, SPECS[api], request_header_flexible(api, version))
    return plan


def decode_request(payload: bytes) -> AnyRequest:
    """Decode a whole request frame payload (everything after the size).

    :raises UnsupportedVersion: a known key at an unsupported version. For ApiVersions
        the caller answers :func:`api_versions_fallback`; for the rest Kafka closes.
    :raises UnknownApiKey: a key brokerd does not implement.
    :raises MalformedRequest: a header or body that does not parse, or trailing bytes.
    """
    key, version, correlation = peek_header(payload)
    plan = _DECODING.get((key, version)) or _decoding(key, version, correlation)
    spec, flexible = plan[1], plan[2]
    header, start = read_request_header(payload, flexible)
    r = Reader(payload, start, flexible=flexible)
    body = read_struct(spec.request, r, version)
    if not spec.trailing_bytes_ignored and r.pos != len(payload):
        r.expect_end()
    return Request(header, body)


def _encoding(cls: type[Any], api_version: int) -> tuple[bool, bool]:
    key = KEY_OF_RESPONSE.get(cls)
    if key is None:
        raise TypeError(f"{cls.__name__} is not a response message")
    plan = response_header_flexible(key, api_version), is_flexible(cls, api_version)
    if SPECS[key].supports(api_version):
        _ENCODING[(cls, api_version)] = plan
    return plan


def encode_response(correlation_id: int, api_version: int, body: Any) -> Frame:
    """A whole response frame (size, header v0 or v1, body) for ``body`` at
    ``api_version``: a :class:`~brokerd.net.frames.SplicedFrame` when the body holds
    :class:`~brokerd.net.frames.StoredRecords` (a Fetch response), else bytes."""
    cls = type(body)
    flexible_header, flexible = _ENCODING.get((cls, api_version)) or _encoding(cls, api_version)
    w = Writer(flexible=flexible)
    write_struct(w, body, api_version)
    return w.response_frame(correlation_id, flexible_header)


def client_software_valid(request: ApiVersionsRequest, api_version: int) -> bool:
    """Whether an ApiVersions request's client software name and version (v3+) are what
    Kafka accepts (earlier versions carry neither)."""
    if api_version < _CLIENT_SOFTWARE_FROM:
        return True
    return all(
        _CLIENT_SOFTWARE.fullmatch(v) is not None
        for v in (request.client_software_name, request.client_software_version)
    )


def meant_for_another_broker(
    request: ApiVersionsRequest, api_version: int, cluster_id: str, node_id: int
) -> bool:
    """Whether an ApiVersions v5+ request names a cluster, and that cluster or the node it
    names is not this broker (KIP-1242). A request without a cluster id targets any
    broker; one with a cluster id but no node id (-1) is refused like Kafka refuses it,
    since no broker has node id -1."""
    if api_version < _TARGET_FROM or request.cluster_id is None:
        return False
    return request.cluster_id != cluster_id or request.node_id != node_id


def api_versions_response(
    api_version: int,
    request: ApiVersionsRequest | None = None,
    *,
    cluster_id: str | None = None,
    node_id: int | None = None,
) -> ApiVersionsResponse:
    """The ApiVersions answer: every supported API and its range; INVALID_REQUEST and no
    API when ``request`` (v3+) names its client software as Kafka refuses it;
    REBOOTSTRAP_REQUIRED and no API when it (v5+) names another cluster or node than
    ``cluster_id``/``node_id`` (the client then forgets what it knew and bootstraps
    again)."""
    if request is not None and not client_software_valid(request, api_version):
        return ApiVersionsResponse(error_code=_INVALID_REQUEST)
    if (
        request is not None
        and cluster_id is not None
        and node_id is not None
        and meant_for_another_broker(request, api_version, cluster_id, node_id)
    ):
        return ApiVersionsResponse(error_code=_REBOOTSTRAP_REQUIRED)
    return ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            ApiVersionRange(api_key=int(k), min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
        ),
    )


def api_versions_fallback(correlation_id: int) -> bytes:
    """The reply to an ApiVersions request of an unsupported version, as Kafka sends it:
    response header v0 and a **version 0** body with UNSUPPORTED_VERSION and one entry,
    ApiVersions itself (the client then retries within that range)."""
    body = ApiVersionsResponse(
        error_code=_UNSUPPORTED_VERSION,
        api_keys=(
            ApiVersionRange(
                api_key=int(ApiKey.API_VERSIONS), min_version=0, max_version=API_VERSIONS_MAX
            ),
        ),
    )
    return response_frame(correlation_id, encode_struct(body, 0))


# -- client side (tests, tools) ------------------------------------------------------


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A whole request frame; the inverse of :func:`decode_request` (tests, tools)."""
    flexible = request_header_flexible(ApiKey(header.api_key), header.api_version)
    return frame(
        encode_request_header(header, flexible) + encode_struct(body, header.api_version)
    )


def decode_response(api_key: ApiKey, api_version: int, payload: bytes) -> tuple[int, Any]:
    """``(correlation_id, body)`` from a response frame payload (tests, tools)."""
    correlation, start = read_response_header(
        payload, response_header_flexible(api_key, api_version)
    )
    cls = SPECS[api_key].response
    r = Reader(payload, start, flexible=is_flexible(cls, api_version))
    body = read_struct(cls, r, api_version)
    r.expect_end()
    return correlation, body



__all__ = [
    "API_VERSIONS_MAX",
    "AUTHORIZED_OPERATIONS_OMITTED",
    "SUPPORTED_VERSIONS",
    "AbortedTransaction",
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnPartitionResult",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnTopic",
    "AddPartitionsToTxnTopicResult",
    "AlterConfigsRequest",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterConfigsResponse",
    "AlterableConfig",
    "ApiVersionRange",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BatchIndexAndErrorMessage",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicResult",
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableGroupResult",
    "DeletableTopicResult",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeleteRecordsPartition",
    "DeleteRecordsPartitionResult",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DeleteRecordsTopic",
    "DeleteRecordsTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribableLogDirTopic",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribeLogDirsPartition",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeLogDirsResult",
    "DescribeLogDirsTopic",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "DescribeTransactionsState",
    "DescribeTransactionsTopicData",
    "DescribedGroup",
    "DescribedGroupMember",
    "EndTxnRequest",
    "EndTxnResponse",
    "FetchPartition",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchTopicResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "ForgottenTopic",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResource",
    "IncrementalAlterableConfig",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "JoinGroupMember",
    "JoinGroupProtocol",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "ListTransactionsState",
    "ListedGroup",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataTopic",
    "OffsetCommitPartition",
    "OffsetCommitPartitionResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetCommitTopic",
    "OffsetCommitTopicResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteRequestTopic",
    "OffsetDeleteResponse",
    "OffsetDeleteResponsePartition",
    "OffsetDeleteResponseTopic",
    "OffsetFetchPartitionResponse",
    "OffsetFetchRequest",
    "OffsetFetchRequestGroup",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchTopic",
    "OffsetFetchTopicResponse",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProduceTopicData",
    "ProduceTopicResponse",
    "Request",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitRequestPartition",
    "TxnOffsetCommitRequestTopic",
    "TxnOffsetCommitResponse",
    "TxnOffsetCommitResponsePartition",
    "TxnOffsetCommitResponseTopic",
    "UnknownApiKey",
    "UnsupportedVersion",
    "api_versions_fallback",
    "api_versions_response",
    "client_software_valid",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "is_supported",
    "request_header_flexible",
    "response_header_flexible",
]
