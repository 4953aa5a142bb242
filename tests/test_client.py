"""brokerd.client against a scripted server on a local socket: pipelined calls answered
in order, error answers raised as NativeError, admin answers checked for their JSON
shape, a closed connection, and the TLS context's arguments."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from brokerd.client import NativeClient, NativeError, tls_context
from brokerd.native import messages as m
from brokerd.native.messages import ErrorCode, RequestType
from brokerd.native.operator_wire import document_answer
from brokerd.native.server_codec import (
    encode_error_response,
    encode_list_offsets_response,
    encode_produce_response,
)


class Server:
    """Accepts one connection; after each chunk it receives, sends the next scripted
    answer (several answers in one chunk for pipelined requests), then closes."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.received = b""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            for answer in self.answers:
                data = conn.recv(65536)
                if not data:
                    return
                self.received += data
                conn.sendall(answer)

    def close(self) -> None:
        self._thread.join(5)
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[list[Server]]:
    servers: list[Server] = []
    yield servers
    for server in servers:
        server.close()


def client_of(serve: list[Server], *answers: bytes) -> NativeClient:
    server = Server(list(answers))
    serve.append(server)
    return NativeClient("127.0.0.1", server.port, timeout=5.0)


def test_calls_decode_their_answers(serve: list[Server]) -> None:
    with client_of(serve, encode_produce_response(42),
                   encode_list_offsets_response(3, 50)) as client:
        assert client.produce("t", 0, [b"a", b"b"]) == 42
        assert client.list_offsets("t", 0) == (3, 50)
    assert serve[0].received.count(b"t") == 2


def test_pipelined_requests_are_answered_in_order(serve: list[Server]) -> None:
    with client_of(serve, encode_produce_response(1) + encode_produce_response(2)) as client:
        from brokerd.native.client_codec import encode_produce

        answers = client.call_many([(RequestType.PRODUCE, encode_produce("t", 0, [b"x"])),
                                    (RequestType.PRODUCE, encode_produce("t", 0, [b"y"]))])
    assert [a.base_offset for a in answers if isinstance(a, m.ProduceResponse)] == [1, 2]


def test_an_error_answer_is_raised_with_its_name(serve: list[Server]) -> None:
    answer = encode_error_response(RequestType.LIST_OFFSETS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "no t")
    with client_of(serve, answer) as client, pytest.raises(NativeError) as error:
        client.list_offsets("t", 0)
    assert error.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (error.value.name, error.value.message) == ("UNKNOWN_TOPIC_OR_PARTITION", "no t")
    assert str(error.value) == "UNKNOWN_TOPIC_OR_PARTITION: no t"
    assert NativeError(65000, "odd").name == "65000"


def test_admin_answers_of_the_wrong_shape_are_malformed(serve: list[Server]) -> None:
    with client_of(serve, document_answer({"name": "t"}), document_answer([1, 2]),
                   document_answer([{"group_id": "g"}])) as client:
        assert client.describe_topic("t") == {"name": "t"}
        with pytest.raises(m.MalformedResponse):
            client.list_groups()
        assert client.list_groups() == [{"group_id": "g"}]


def test_a_closed_connection_is_a_connection_error(serve: list[Server]) -> None:
    with client_of(serve) as client, pytest.raises(ConnectionError):
        client.list_offsets("t", 0)


def test_tls_context_verifies_and_refuses_a_lone_key_file() -> None:
    import ssl

    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    with pytest.raises(ValueError, match="key file without a certificate"):
        tls_context(keyfile="key.pem")
