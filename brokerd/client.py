# -*- test-case-name: tests.test_client -*-
"""A small blocking client of the native protocol, for ``brokerctl``, tests and benchmarks.

It uses the request encoders and the incremental response decoder of
:mod:`brokerd.native.client_codec` over a socket, plain or TLS (:func:`tls_context`): one
connection, requests answered in order, optional pipelining. The admin requests
(``docs/operator.md``) answer with the JSON form of the broker's views, as plain dicts; the
queue requests (``docs/queues.md``, "The same queue on the native protocol") acquire and
acknowledge share-group records. It is not thread-safe and does not reconnect by itself
(the caller decides; ``brokerctl consume --follow`` does).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping, Sequence

from brokerd.native import messages as m
from brokerd.native.client_codec import (
    ResponseDecoder,
    encode_create_topic,
    encode_fetch,
    encode_list_offsets,
    encode_list_topics,
    encode_long_poll_fetch,
    encode_produce,
    encode_request,
)
from brokerd.native.messages import RequestType
from brokerd.native.operator_messages import (
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    DeleteGroupRequest,
    DeleteTopicRequest,
    DescribeGroupRequest,
    DescribeTopicRequest,
    JsonValue,
    ListGroupsRequest,
    OperatorRequest,
    OperatorResponse,
    ResetMode,
    ResetOffsetsRequest,
)
from brokerd.native.operator_wire import TYPE_OF_CLASS as OPERATOR_TYPE_OF_CLASS
from brokerd.native.queue_messages import (
    AckKind,
    AckRange,
    DescribeShareGroupRequest,
    ListShareGroupsRequest,
    QueueAckRequest,
    QueueFetchRequest,
    QueueFetchResponse,
    QueueRecord,
)

#: A JSON object of an admin answer (a view's ``to_json`` form).
JsonObject = dict[str, JsonValue]

#: Read size for responses; fetch responses reach 1 MiB and more.
_RECV_BYTES = 256 * 1024


#: Seconds a topic create, grow or delete may take: its file work grows with the
#: partition count (10,000 partitions: seconds to tens of seconds on a busy disk), so it
#: gets Kafka's default.api.timeout.ms rather than the per-request timeout.
TOPIC_CHANGE_TIMEOUT = 60.0


class NativeError(Exception):
    """The broker answered a request with an error."""

    def __init__(self, code: int, message: str) -> None:
        try:
            name = m.ErrorCode(code).name
        except ValueError:
            name = str(code)
        super().__init__(f"{name}: {message}")
        self.code = code
        self.name = name
        self.message = message


def tls_context(
    cafile: str | None = None, certfile: str | None = None, keyfile: str | None = None
) -> ssl.SSLContext:
    """A client TLS context that verifies the broker's certificate and host name: against
    ``cafile`` (PEM), or the system's CAs without one; with a client certificate when
    ``certfile`` is given (``keyfile`` defaults to the same file)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    if certfile is not None:
        context.load_cert_chain(certfile, keyfile)
    elif keyfile is not None:
        raise ValueError("a key file without a certificate file")
    return context


class NativeClient:
    """One connection to a broker's native listener.

    With ``tls``, the connection is TLS and the broker's certificate must name
    ``server_hostname`` (default: ``host``, an IP address is matched against the
    certificate's IP addresses).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self.timeout = timeout
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=server_hostname or host)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._decoder = ResponseDecoder()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> NativeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call_many(
        self, requests: Sequence[tuple[int, bytes]], *, timeout: float | None = None
    ) -> list[m.Response]:
        """Send every ``(type, frame)`` at once (pipelined) and return the responses."""
        for request_type, _ in requests:
            self._decoder.expect(request_type)
        self._sock.sendall(b"".join(frame for _, frame in requests))
        self._sock.settimeout(timeout if timeout is not None else self.timeout)
        responses: list[m.Response] = []
        while len(responses) < len(requests):
            data = self._sock.recv(_RECV_BYTES)
            if not data:
                raise ConnectionError("the broker closed the connection")
            responses.extend(self._decoder.feed(data))
        return responses

    def _call(
        self, request_type: int, frame: bytes, timeout: float | None = None
    ) -> m.Response:
        response = self.call_many([(request_type, frame)], timeout=timeout)[0]
        if isinstance(response, m.ErrorResponse):
            raise NativeError(response.code, response.message)
        return response

    def produce(self, topic: str, partition: int, values: Sequence[bytes]) -> int:
        """Append ``values``; return the offset of the first."""
        response = self._call(RequestType.PRODUCE, encode_produce(topic, partition, values))
        assert isinstance(response, m.ProduceResponse)
        return response.base_offset

    def fetch(self, topic: str, partition: int, offset: int) -> list[bytes]:
        """Type-2 fetch: values from ``offset`` on (capped by the broker)."""
        response = self._call(RequestType.FETCH, encode_fetch(topic, partition, offset))
        assert isinstance(response, m.FetchResponse)
        return list(response.values)

    def poll(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = 1000,
        min_bytes: int = 1,
        max_bytes: int = 1024 * 1024,
    ) -> m.LongPollFetchResponse:
        """Long-poll fetch: waits up to ``max_wait_ms`` for data; records carry offsets."""
        frame = encode_long_poll_fetch(
            topic,
            partition,
            offset,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
        )
        response = self._call(
            RequestType.LONG_POLL_FETCH, frame, timeout=self.timeout + max_wait_ms / 1000.0
        )
        assert isinstance(response, m.LongPollFetchResponse)
        return response

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        self._call(
            RequestType.CREATE_TOPIC,
            encode_create_topic(topic, partitions),
            timeout=max(self.timeout, TOPIC_CHANGE_TIMEOUT),
        )

    def list_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(log_start_offset, high_watermark)``."""
        response = self._call(RequestType.LIST_OFFSETS, encode_list_offsets(topic, partition))
        assert isinstance(response, m.ListOffsetsResponse)
        return response.log_start_offset, response.high_watermark

    def list_topics(self) -> list[m.TopicEntry]:
        response = self._call(RequestType.LIST_TOPICS, encode_list_topics())
        assert isinstance(response, m.ListTopicsResponse)
        return list(response.topics)

    # -- admin requests (types 7 to 14) --------------------------------------------------

    def _admin(self, request: OperatorRequest) -> JsonValue:
        timeout = (
            max(self.timeout, TOPIC_CHANGE_TIMEOUT)
            if isinstance(request, (DeleteTopicRequest, CreatePartitionsRequest))
            else None
        )
        response = self._call(
            OPERATOR_TYPE_OF_CLASS[type(request)], encode_request(request), timeout=timeout
        )
        assert isinstance(response, OperatorResponse)
        return response.document

    def _admin_object(self, request: OperatorRequest) -> JsonObject:
        document = self._admin(request)
        if not isinstance(document, dict):
            raise m.MalformedResponse(f"expected a JSON object, not {type(document).__name__}")
        return document

    def _admin_list(self, request: OperatorRequest) -> list[JsonObject]:
        document = self._admin(request)
        if not isinstance(document, list) or not all(isinstance(d, dict) for d in document):
            raise m.MalformedResponse("expected a JSON list of objects")
        return [d for d in document if isinstance(d, dict)]

    def describe_topic(self, topic: str) -> JsonObject:
        """The topic's view: partitions with offsets and sizes, effective configs."""
        return self._admin_object(DescribeTopicRequest(topic))

    def alter_topic_configs(
        self, topic: str, set_configs: Mapping[str, str], delete: Sequence[str] = ()
    ) -> JsonObject:
        """Set and delete config overrides; the topic's view afterwards."""
        request = AlterTopicConfigsRequest(topic, tuple(set_configs.items()), tuple(delete))
        return self._admin_object(request)

    def delete_topic(self, topic: str) -> None:
        self._admin(DeleteTopicRequest(topic))

    def create_partitions(self, topic: str, total: int) -> JsonObject:
        """Grow the topic to ``total`` partitions; its view afterwards."""
        return self._admin_object(CreatePartitionsRequest(topic, total))

    def list_groups(self) -> list[JsonObject]:
        """One summary per consumer group (``docs/protocol.md``, ListGroups)."""
        return self._admin_list(ListGroupsRequest())

    def describe_group(self, group_id: str) -> JsonObject:
        """The group's view: members, assignments, committed offsets, lag."""
        return self._admin_object(DescribeGroupRequest(group_id))

    def reset_offsets(
        self,
        group_id: str,
        topic: str,
        mode: ResetMode,
        value: int = 0,
        *,
        partitions: Sequence[int] = (),
        dry_run: bool = False,
    ) -> list[JsonObject]:
        """Reset an inactive group's offsets of ``topic``; one row per partition."""
        request = ResetOffsetsRequest(
            group_id, topic, mode, value, tuple(partitions), dry_run
        )
        return self._admin_list(request)

    def delete_group(self, group_id: str) -> None:
        self._admin(DeleteGroupRequest(group_id))

    # -- queue requests (types 15 to 18, share groups) -----------------------------------

    def queue_fetch(
        self,
        group_id: str,
        topic: str,
        partition: int,
        *,
        max_records: int = 500,
        max_wait_ms: int = 1000,
    ) -> list[QueueRecord]:
        """Acquire up to ``max_records`` records of the partition for this connection
        (one share-group member per connection), waiting up to ``max_wait_ms`` for some.
        Each record carries its offset and delivery count; acknowledge it on this same
        connection (closing it releases what it holds)."""
        request = QueueFetchRequest(group_id, topic, partition, max_records, max_wait_ms)
        response = self._call(
            RequestType.QUEUE_FETCH,
            encode_request(request),
            timeout=self.timeout + max_wait_ms / 1000.0,
        )
        assert isinstance(response, QueueFetchResponse)
        return list(response.records)

    def queue_acknowledge(
        self,
        group_id: str,
        topic: str,
        partition: int,
        ranges: Sequence[tuple[int, int, AckKind]],
    ) -> None:
        """Acknowledge ``(first, last, kind)`` ranges of records this connection holds;
        all of them or, on an error (``INVALID_RECORD_STATE``), none."""
        request = QueueAckRequest(
            group_id, topic, partition, tuple(AckRange(f, last, k) for f, last, k in ranges)
        )
        self._call(RequestType.QUEUE_ACKNOWLEDGE, encode_request(request))

    def describe_share_group(self, group_id: str) -> JsonObject:
        """Type 17: the share group's figures per partition."""
        response = self._call(
            RequestType.DESCRIBE_SHARE_GROUP, encode_request(DescribeShareGroupRequest(group_id))
        )
        assert isinstance(response, OperatorResponse)
        if not isinstance(response.document, dict):
            raise m.MalformedResponse("expected a JSON object")
        return response.document

    def list_share_groups(self) -> list[JsonObject]:
        """Type 18: every share group, summarised."""
        response = self._call(
            RequestType.LIST_SHARE_GROUPS, encode_request(ListShareGroupsRequest())
        )
        assert isinstance(response, OperatorResponse)
        document = response.document
        if not isinstance(document, list) or not all(isinstance(d, dict) for d in document):
            raise m.MalformedResponse("expected a JSON list of objects")
        return [d for d in document if isinstance(d, dict)]
