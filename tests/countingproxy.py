"""A loopback TCP proxy that counts the requests passing through it, by protocol.

Used to count the fetches a broker handles from an idle consumer without touching the
broker. It parses just enough of each stream to count:

* Kafka: ``int32 size`` + payload whose first ``int16`` is the API key (1 = Fetch). A
  Kafka client connects to the address Metadata advertises, not to its bootstrap
  address, so the proxy rewrites the broker's ``127.0.0.1:<port>`` in responses to its
  own port (the port is a fixed-width ``int32`` after the host string in Metadata and
  FindCoordinator, so frame lengths do not change). Every connection then passes here.
* Native: requests have no length prefix, so the codec's own request decoder splits the
  stream; responses pass unparsed.

Threads, blocking sockets; only ever listens on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Literal

from brokerd.native import messages, server_codec

_I32 = struct.Struct(">i")
KAFKA_FETCH = 1
NATIVE_TYPES = {
    messages.ProduceRequest: 1,
    messages.FetchRequest: 2,
    messages.CreateTopicRequest: 3,
    messages.ListOffsetsRequest: 4,
    messages.ListTopicsRequest: 5,
    messages.LongPollFetchRequest: 6,
}


class _KafkaFrames:
    """Splits a Kafka byte stream into size-prefixed frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out = []
        while len(self._buf) >= 4:
            (size,) = _I32.unpack_from(self._buf)
            if len(self._buf) < 4 + size:
                break
            out.append(bytes(self._buf[: 4 + size]))
            del self._buf[: 4 + size]
        return out


class CountingProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port`` and counts requests.

    ``events`` holds ``(monotonic time, key)`` per request: the Kafka API key, or the
    native request type.
    """

    def __init__(self, target_port: int, kind: Literal["kafka", "native"]) -> None:
        self.target_port = target_port
        self.kind = kind
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self.events: list[tuple[float, int]] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._start(self._accept)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def count(self, key: int, since: float = 0.0, until: float = float("inf")) -> int:
        with self._lock:
            return sum(1 for t, k in self.events if k == key and since <= t < until)

    def wait_for(self, key: int, n: int = 1, timeout: float = 15.0) -> bool:
        """Wait until at least ``n`` requests of ``key`` passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count(key) >= n:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        self._closed = True
        with self._lock:
            sockets = [self._listener, *self._sockets]
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------

    def _start(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, upstream]
            self._start(self._requests, client, upstream)
            self._start(self._responses, upstream, client)

    def _record(self, key: int) -> None:
        with self._lock:
            self.events.append((time.monotonic(), key))

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        kafka = _KafkaFrames()
        native = server_codec.RequestDecoder(max_produce_bytes=1 << 30)
        self._pipe(src, dst, lambda data: self._count(data, kafka, native))

    def _count(
        self, data: bytes, kafka: _KafkaFrames, native: server_codec.RequestDecoder
    ) -> bytes:
        if self.kind == "kafka":
            for frame in kafka.feed(data):
                if len(frame) >= 6:
                    self._record(struct.unpack_from(">h", frame, 4)[0])
        else:
            native.receive(data)
            while (event := native.next_event()) is not None:
                self._record(NATIVE_TYPES.get(type(event), 0))
        return data

    def _responses(self, src: socket.socket, dst: socket.socket) -> None:
        if self.kind == "native":
            self._pipe(src, dst, lambda data: data)
            return
        frames = _KafkaFrames()
        old = b"127.0.0.1" + _I32.pack(self.target_port)
        new = b"127.0.0.1" + _I32.pack(self.port)
        # Whole frames only, so the pattern is never split across reads.
        self._pipe(src, dst, lambda data: b"".join(f.replace(old, new) for f in frames.feed(data)))

    def _pipe(
        self, src: socket.socket, dst: socket.socket, transform: Callable[[bytes], bytes]
    ) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                out = transform(data)
                if out:
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            # Pass the close on, both ways: the peer thread then ends too.
            for s in (dst, src):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
