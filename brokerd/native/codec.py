"""The native codec's old single import path, kept for callers that use it.

What this module does: re-exports, unchanged, the names that used to live here, so that
``from brokerd.native import codec`` and ``codec.<name>`` keep working. New code imports
from where each part now lives:

* ``brokerd.native.messages``: request/response messages, ``RequestType``,
  ``ErrorCode``, ``RequestError``, the limits, ``error_code_for``;
* ``brokerd.native.wire``: byte layouts and the request layout table;
* ``brokerd.native.server_codec``: ``RequestDecoder`` and the response encoders;
* ``brokerd.native.client_codec``: the request encoders, ``ResponseDecoder`` and
  ``decode_response``.

What it does not do: define anything of its own.
"""

from __future__ import annotations

from brokerd.native.client_codec import (
    ResponseDecoder,
    decode_response,
    encode_create_topic,
    encode_fetch,
    encode_list_offsets,
    encode_list_topics,
    encode_long_poll_fetch,
    encode_produce,
    encode_request,
)
from brokerd.native.messages import (
    DEFAULT_MAX_FETCH_BYTES,
    DEFAULT_MAX_PRODUCE_BYTES,
    FETCH_ERROR_MARKER,
    MAX_ERROR_MESSAGE_BYTES,
    MAX_PARTITIONS,
    MAX_TOPIC_LENGTH,
    PRODUCE_RECORD_OVERHEAD,
    CreateTopicRequest,
    CreateTopicResponse,
    ErrorCode,
    ErrorResponse,
    FetchedRecord,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListTopicsRequest,
    ListTopicsResponse,
    LongPollFetchRequest,
    LongPollFetchResponse,
    MalformedResponse,
    ProduceRequest,
    ProduceResponse,
    Request,
    RequestError,
    RequestEvent,
    RequestType,
    Response,
    TopicEntry,
    error_code_for,
)
from brokerd.native.server_codec import (
    RequestDecoder,
    encode_create_topic_response,
    encode_error_response,
    encode_fetch_response,
    encode_list_offsets_response,
    encode_list_topics_response,
    encode_long_poll_fetch_response,
    encode_produce_response,
)

__all__ = [
    "DEFAULT_MAX_FETCH_BYTES",
    "DEFAULT_MAX_PRODUCE_BYTES",
    "FETCH_ERROR_MARKER",
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_PARTITIONS",
    "MAX_TOPIC_LENGTH",
    "PRODUCE_RECORD_OVERHEAD",
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
    "RequestDecoder",
    "RequestError",
    "RequestEvent",
    "RequestType",
    "Response",
    "ResponseDecoder",
    "TopicEntry",
    "decode_response",
    "encode_create_topic",
    "encode_create_topic_response",
    "encode_error_response",
    "encode_fetch",
    "encode_fetch_response",
    "encode_list_offsets",
    "encode_list_offsets_response",
    "encode_list_topics",
    "encode_list_topics_response",
    "encode_long_poll_fetch",
    "encode_long_poll_fetch_response",
    "encode_produce",
    "encode_produce_response",
    "encode_request",
    "error_code_for",
]
