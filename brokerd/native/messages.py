"""The native protocol's vocabulary: request and response messages, codes and limits.

What this module does: defines the attrs-frozen request classes (one per request type),
the response classes a client decodes, :class:`RequestError` (a request the server's
decoder refused), the :class:`RequestType` and :class:`ErrorCode` enums, the named
limits both sides apply, and :func:`error_code_for`, the one map from the broker's shared
exceptions to wire codes.

What it does not do: know any byte layout (``brokerd.native.wire``), decode or encode
(``brokerd.native.server_codec`` and ``brokerd.native.client_codec``), or do I/O. The
wire format itself is specified in ``docs/protocol.md``.
"""

from __future__ import annotations

import enum

import attrs

from brokerd import errors
from brokerd.core.share.partition import InvalidAcknowledgement
from brokerd.names import MAX_TOPIC_LENGTH
from brokerd.native.operator_messages import OperatorRequest, OperatorResponse
from brokerd.native.queue_messages import QueueAckResponse, QueueFetchResponse, QueueRequest
from brokerd.operator import errors as operator_errors

__all__ = [
    "DEFAULT_MAX_FETCH_BYTES",
    "DEFAULT_MAX_PRODUCE_BYTES",
    "FETCH_ERROR_MARKER",
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_PARTITIONS",
    "MAX_TOPIC_LENGTH",
    "OPERATOR_REQUEST_TYPES",
    "PRODUCE_RECORD_OVERHEAD",
    "QUEUE_REQUEST_TYPES",
    "CreateTopicRequest",
    "CreateTopicResponse",
    "ErrorCode",
    "ErrorResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchedRecord",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListTopicsRequest",
    "ListTopicsResponse",
    "LongPollFetchRequest",
    "LongPollFetchResponse",
    "MalformedResponse",
    "ProduceRequest",
    "ProduceResponse",
    "Request",
    "RequestError",
    "RequestEvent",
    "RequestType",
    "Response",
    "TopicEntry",
    "error_code_for",
]

# --------------------------------------------------------------------------- limits

#: Default cap on a Produce payload: the sum of the value sizes plus a 4-byte size header
#: per record. A larger request is refused before it is buffered.
DEFAULT_MAX_PRODUCE_BYTES = 1024 * 1024
#: Default cap on the values returned by one Fetch or LongPollFetch (at least one record
#: is always returned when one exists, even if it alone is larger).
DEFAULT_MAX_FETCH_BYTES = 1024 * 1024
#: Each produced record costs its value plus this size header against the produce cap, so
#: a request can never claim more records than ``max_produce_bytes // 4``.
PRODUCE_RECORD_OVERHEAD = 4
#: Error messages travel behind a u16 length; longer ones are cut (on a UTF-8 boundary).
MAX_ERROR_MESSAGE_BYTES = 0xFFFF
#: Sent in place of the record count by a failed type-2 Fetch (pinned).
FETCH_ERROR_MARKER = 0xFFFFFFFF
#: CreateTopic accepts 1..MAX_PARTITIONS partitions. Each partition is a directory and open
#: files, so a wire count is checked by the decoder, before the core could act on it (the
#: core may apply a tighter limit of its own).
MAX_PARTITIONS = 10_000


# --------------------------------------------------------------------------- enums


class RequestType(enum.IntEnum):
    """The ``u16`` that starts every request."""

    PRODUCE = 1
    FETCH = 2
    CREATE_TOPIC = 3
    LIST_OFFSETS = 4
    LIST_TOPICS = 5
    LONG_POLL_FETCH = 6
    # The admin requests (brokerd.native.operator_messages, docs/protocol.md section 2.8).
    DESCRIBE_TOPIC = 7
    ALTER_TOPIC_CONFIGS = 8
    DELETE_TOPIC = 9
    CREATE_PARTITIONS = 10
    LIST_GROUPS = 11
    DESCRIBE_GROUP = 12
    RESET_OFFSETS = 13
    DELETE_GROUP = 14
    # The queue requests (brokerd.native.queue_messages, docs/protocol.md section 2.9).
    QUEUE_FETCH = 15
    QUEUE_ACKNOWLEDGE = 16
    DESCRIBE_SHARE_GROUP = 17
    LIST_SHARE_GROUPS = 18


#: The request types whose frame is ``u16 type, u32 body_len, body`` and whose success
#: answer is ``u16 error = 0`` followed, for most, by a JSON document.
OPERATOR_REQUEST_TYPES = frozenset(range(RequestType.DESCRIBE_TOPIC, RequestType.DELETE_GROUP + 1))
#: The queue request types: framed as the admin types, and every success answer is
#: ``u16 error = 0, u32 body_len, body``.
QUEUE_REQUEST_TYPES = frozenset(
    range(RequestType.QUEUE_FETCH, RequestType.LIST_SHARE_GROUPS + 1)
)


class ErrorCode(enum.IntEnum):
    """Error codes of the native protocol; 0 means success. Documented in docs/protocol.md."""

    NONE = 0
    UNKNOWN_REQUEST_TYPE = 1
    MALFORMED_REQUEST = 2
    INVALID_TOPIC = 3
    UNKNOWN_TOPIC_OR_PARTITION = 4
    OFFSET_OUT_OF_RANGE = 5
    REQUEST_TOO_LARGE = 6
    TOPIC_ALREADY_EXISTS = 7
    INVALID_PARTITIONS = 8
    STORAGE_ERROR = 9
    TOO_MANY_WAITERS = 10
    SHUTTING_DOWN = 11
    INTERNAL_ERROR = 12
    CORRUPT_RECORD = 13
    TOPIC_AUTHORIZATION_FAILED = 14
    INVALID_CONFIG = 15
    GROUPS_UNAVAILABLE = 16
    INVALID_GROUP_ID = 17
    GROUP_ID_NOT_FOUND = 18
    NON_EMPTY_GROUP = 19
    GROUP_AUTHORIZATION_FAILED = 20
    UNSUPPORTED_REQUEST = 21
    RESPONSE_TOO_LARGE = 22
    INVALID_RECORD_STATE = 23


#: The one table from shared broker errors to wire codes. Lookup walks the exception's
#: MRO, so a subclass added later inherits its parent's code.
_ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    errors.InvalidTopic: ErrorCode.INVALID_TOPIC,
    errors.AuthorizationFailed: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    operator_errors.GroupAuthorizationFailed: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    errors.InvalidConfig: ErrorCode.INVALID_CONFIG,
    operator_errors.GroupsUnavailable: ErrorCode.GROUPS_UNAVAILABLE,
    operator_errors.InvalidGroupId: ErrorCode.INVALID_GROUP_ID,
    operator_errors.GroupNotFound: ErrorCode.GROUP_ID_NOT_FOUND,
    operator_errors.GroupNotEmpty: ErrorCode.NON_EMPTY_GROUP,
    operator_errors.OperatorUnavailable: ErrorCode.UNSUPPORTED_REQUEST,
    InvalidAcknowledgement: ErrorCode.INVALID_RECORD_STATE,
    errors.UnknownTopicOrPartition: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    errors.TopicAlreadyExists: ErrorCode.TOPIC_ALREADY_EXISTS,
    errors.InvalidPartitions: ErrorCode.INVALID_PARTITIONS,
    errors.OffsetOutOfRange: ErrorCode.OFFSET_OUT_OF_RANGE,
    errors.CorruptBatch: ErrorCode.CORRUPT_RECORD,
    errors.RecordTooLarge: ErrorCode.REQUEST_TOO_LARGE,
    errors.StorageError: ErrorCode.STORAGE_ERROR,
    # A stored batch that fails validation is damage, not an I/O failure.
    errors.CorruptStoredBatch: ErrorCode.CORRUPT_RECORD,
    errors.ShuttingDown: ErrorCode.SHUTTING_DOWN,
    errors.TooManyWaiters: ErrorCode.TOO_MANY_WAITERS,
    # The native produce is not idempotent, so these cannot arise from a native request;
    # if the core ever raises them here it is a bug on our side, hence INTERNAL_ERROR.
    errors.DuplicateSequence: ErrorCode.INTERNAL_ERROR,
    errors.OutOfOrderSequence: ErrorCode.INTERNAL_ERROR,
    errors.InvalidProducerEpoch: ErrorCode.INTERNAL_ERROR,
    errors.BrokerError: ErrorCode.INTERNAL_ERROR,
}


def error_code_for(exc: BaseException) -> ErrorCode | None:
    """Return the wire code for a ``brokerd.errors`` exception, or ``None`` for any other
    exception (which the caller should log and answer as ``INTERNAL_ERROR`` without
    revealing its text)."""
    for klass in type(exc).__mro__:
        code = _ERROR_CODES.get(klass)
        if code is not None:
            return code
    return None


# --------------------------------------------------------------------------- requests


@attrs.frozen
class ProduceRequest:
    """Type 1: append ``values`` (in order) to one partition."""

    topic: str
    partition: int
    values: tuple[bytes, ...]

    @property
    def count(self) -> int:
        """The wire's record count."""
        return len(self.values)


@attrs.frozen
class FetchRequest:
    """Type 2, the original fetch: records from ``offset`` on; never waits."""

    topic: str
    partition: int
    offset: int


@attrs.frozen
class CreateTopicRequest:
    """Type 3: create ``topic`` with ``partitions`` partitions."""

    topic: str
    partitions: int


@attrs.frozen
class ListOffsetsRequest:
    """Type 4: log start offset and high watermark of one partition."""

    topic: str
    partition: int


@attrs.frozen
class ListTopicsRequest:
    """Type 5: every topic with its partition count."""


@attrs.frozen
class LongPollFetchRequest:
    """Type 6: like Fetch, but parks until ``min_bytes`` of values exist or
    ``max_wait_ms`` passes; answers offsets and the high watermark too."""

    topic: str
    partition: int
    offset: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int


Request = (
    ProduceRequest
    | FetchRequest
    | CreateTopicRequest
    | ListOffsetsRequest
    | ListTopicsRequest
    | LongPollFetchRequest
    | OperatorRequest
    | QueueRequest
)


@attrs.frozen
class RequestError:
    """A request the decoder refused.

    ``request_type`` is the type the client sent (it decides the error form: type 2 uses
    the fetch form). ``fatal`` means the frame boundary is lost: answer, then close.
    """

    request_type: int
    code: ErrorCode
    message: str
    fatal: bool = False


RequestEvent = Request | RequestError


# --------------------------------------------------------------------------- responses


@attrs.frozen
class TopicEntry:
    """One topic in a ListTopics response."""

    name: str
    partitions: int


@attrs.frozen
class FetchedRecord:
    """One record in a LongPollFetch response. ``value`` is ``b""`` for a null value."""

    offset: int
    value: bytes


@attrs.frozen
class ProduceResponse:
    base_offset: int


@attrs.frozen
class FetchResponse:
    """Values from the requested offset on; the next fetch starts at offset + len."""

    values: tuple[bytes, ...]


@attrs.frozen
class CreateTopicResponse:
    pass


@attrs.frozen
class ListOffsetsResponse:
    log_start_offset: int
    high_watermark: int


@attrs.frozen
class ListTopicsResponse:
    topics: tuple[TopicEntry, ...]


@attrs.frozen
class LongPollFetchResponse:
    high_watermark: int
    records: tuple[FetchedRecord, ...]


@attrs.frozen
class ErrorResponse:
    """A failed request, any type. ``code`` stays an int: a newer server may send codes
    this client does not know (see :attr:`error_code`)."""

    request_type: int
    code: int
    message: str

    @property
    def error_code(self) -> ErrorCode | None:
        try:
            return ErrorCode(self.code)
        except ValueError:
            return None


Response = (
    ProduceResponse
    | FetchResponse
    | CreateTopicResponse
    | ListOffsetsResponse
    | ListTopicsResponse
    | LongPollFetchResponse
    | OperatorResponse
    | QueueFetchResponse
    | QueueAckResponse
    | ErrorResponse
)


class MalformedResponse(ValueError):
    """The server's bytes do not parse as the response that was expected."""
