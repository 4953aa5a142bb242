"""Loopback tests against a real ``twistd broker``, speaking the native protocol with a
client written only from the tables in docs/protocol.md and the pinned Produce/error formats (plain
``struct``, not brokerd's codec)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from brokerd.client import NativeClient
from brokerd.testing import LaunchedBroker

from tests.brokerproc import BROKERCTL, env


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _client(brokerd: LaunchedBroker) -> NativeClient:
    return NativeClient("127.0.0.1", _port(brokerd.native_address), timeout=10.0)


def produce_frame(topic: str, partition: int, values: list[bytes]) -> bytes:
    t = topic.encode()
    body = b"".join(struct.pack(">I", len(v)) + v for v in values)
    return struct.pack(">HH", 1, len(t)) + t + struct.pack(">II", partition, len(values)) + body


def fetch_frame(topic: str, partition: int, offset: int) -> bytes:
    t = topic.encode()
    return struct.pack(">HH", 2, len(t)) + t + struct.pack(">IQ", partition, offset)


class RawClient:
    """Reads exactly the bytes the tables say, nothing more."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def close(self) -> None:
        self.sock.close()

    def read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def produce_response(self) -> tuple[int, int]:
        (error,) = struct.unpack(">H", self.read(2))
        if error:
            (n,) = struct.unpack(">H", self.read(2))
            raise AssertionError(f"produce error {error}: {self.read(n)!r}")
        (base,) = struct.unpack(">Q", self.read(8))
        return error, base

    def error_tail(self) -> tuple[int, str]:
        error, n = struct.unpack(">HH", self.read(4))
        return error, self.read(n).decode()

    def fetch_response(self) -> list[bytes] | tuple[int, str]:
        (count,) = struct.unpack(">I", self.read(4))
        if count == 0xFFFFFFFF:
            return self.error_tail()
        values = []
        for _ in range(count):
            (size,) = struct.unpack(">I", self.read(4))
            values.append(self.read(size))
        return values

    def fetch_all(self, topic: str, partition: int, offset: int = 0) -> list[bytes]:
        out: list[bytes] = []
        while True:
            self.sock.sendall(fetch_frame(topic, partition, offset + len(out)))
            values = self.fetch_response()
            assert isinstance(values, list), values
            if not values:
                return out
            out.extend(values)


def test_produce_and_fetch_byte_exact(brokerd: LaunchedBroker) -> None:
    c = RawClient(_port(brokerd.native_address))
    values = [b"", b"x", bytes(range(256)), b"\x00" * 1000]
    c.sock.sendall(produce_frame("bytes", 0, values))
    assert c.produce_response() == (0, 0)
    c.sock.sendall(produce_frame("bytes", 0, [b"more"]))
    assert c.produce_response() == (0, 4)
    c.sock.sendall(fetch_frame("bytes", 0, 0))
    raw = c.read(4)
    assert raw == b"\x00\x00\x00\x05"
    expected = b"".join(struct.pack(">I", len(v)) + v for v in [*values, b"more"])
    assert c.read(len(expected)) == expected
    # At the end of the log: count 0, and type 2 does not wait.
    c.sock.sendall(fetch_frame("bytes", 0, 5))
    assert c.read(4) == b"\x00\x00\x00\x00"
    c.close()


def test_pipelined_and_dribbled(brokerd: LaunchedBroker) -> None:
    c = RawClient(_port(brokerd.native_address))
    frames = [produce_frame("pipe", 0, [b"a%d" % i]) for i in range(20)]
    frames.append(fetch_frame("pipe", 0, 0))
    # Twenty produces and a fetch in one write; all answered, in order.
    c.sock.sendall(b"".join(frames[:20]))
    assert [c.produce_response()[1] for _ in range(20)] == list(range(20))
    # One byte at a time.
    for byte in fetch_frame("pipe", 0, 18):
        c.sock.sendall(bytes([byte]))
        time.sleep(0.001)
    assert c.fetch_response() == [b"a18", b"a19"]
    c.close()


def test_restart_keeps_everything(brokerd: LaunchedBroker) -> None:
    with _client(brokerd) as client:
        client.create_topic("keep", 2)
    c = RawClient(_port(brokerd.native_address))
    for i in range(50):
        c.sock.sendall(produce_frame("keep", i % 2, [b"v%d" % i]))
        c.produce_response()
    c.close()
    # twistd re-raises the signal after a clean shutdown, so systemd sees SIGTERM.
    assert brokerd.stop() == -15
    assert (brokerd.data_dir / ".clean_shutdown").exists()
    assert (brokerd.data_dir / "keep-0").is_dir()
    brokerd.start()
    c = RawClient(_port(brokerd.native_address))
    assert c.fetch_all("keep", 0) == [b"v%d" % i for i in range(0, 50, 2)]
    assert c.fetch_all("keep", 1) == [b"v%d" % i for i in range(1, 50, 2)]
    c.sock.sendall(produce_frame("keep", 0, [b"after"]))
    assert c.produce_response() == (0, 25)
    c.close()


# The broker's own default (fsync every write before the answer), not the test mode's.
@pytest.mark.brokerd(fsync="always")
def test_kill_9_after_acknowledged_produce_loses_nothing(brokerd: LaunchedBroker) -> None:
    c = RawClient(_port(brokerd.native_address))
    acked = []
    for i in range(30):
        c.sock.sendall(produce_frame("crash", 0, [b"r%d-%d" % (i, j) for j in range(10)]))
        acked.append(c.produce_response()[1])
    brokerd.kill()
    c.close()
    brokerd.start()
    c = RawClient(_port(brokerd.native_address))
    got = c.fetch_all("crash", 0)
    assert got == [b"r%d-%d" % (i, j) for i in range(30) for j in range(10)]
    assert acked == list(range(0, 300, 10))
    c.close()


def test_topics_and_partitions_are_independent(brokerd: LaunchedBroker) -> None:
    with _client(brokerd) as client:
        client.create_topic("two", 2)
        client.produce("two", 0, [b"p0"])
        client.produce("two", 1, [b"p1a", b"p1b"])
        client.produce("one", 0, [b"o"])
        assert client.fetch("two", 0, 0) == [b"p0"]
        assert client.fetch("two", 1, 0) == [b"p1a", b"p1b"]
        assert client.fetch("one", 0, 0) == [b"o"]
        assert client.list_offsets("two", 1) == (0, 2)
        names = {t.name: t.partitions for t in client.list_topics()}
        assert names == {"two": 2, "one": 1}


def test_bad_topic_names_never_touch_the_filesystem(
    brokerd: LaunchedBroker, tmp_path: Path
) -> None:
    before = sorted(os.listdir(tmp_path))
    data_before = sorted(os.listdir(brokerd.data_dir))
    c = RawClient(_port(brokerd.native_address))
    for name in ("../x", "..", ".", "a/b", "x" * 250):
        c.sock.sendall(produce_frame(name, 0, [b"v"]))
        (error,) = struct.unpack(">H", c.read(2))
        _, message = _tail(c)
        assert error != 0 and message
        c.sock.sendall(fetch_frame(name, 0, 0))
        result = c.fetch_response()
        assert isinstance(result, tuple) and result[0] != 0
    # The connection still works after the refusals.
    c.sock.sendall(produce_frame("fine", 0, [b"ok"]))
    assert c.produce_response() == (0, 0)
    c.close()
    assert sorted(os.listdir(tmp_path)) == before
    assert sorted(os.listdir(brokerd.data_dir)) == sorted([*data_before, "fine-0"])
    assert not (tmp_path / "x").exists()


def _tail(c: RawClient) -> tuple[int, str]:
    (n,) = struct.unpack(">H", c.read(2))
    return 0, c.read(n).decode()


def test_garbage_leaves_the_broker_serving_others(brokerd: LaunchedBroker) -> None:
    good = RawClient(_port(brokerd.native_address))
    good.sock.sendall(produce_frame("safe", 0, [b"before"]))
    good.produce_response()
    for garbage in (
        b"\xff\xff" + os.urandom(64),
        b"\x00\x01\xff\xff" + b"z" * 10,
        os.urandom(4096),
    ):
        bad = socket.create_connection(("127.0.0.1", _port(brokerd.native_address)), timeout=5)
        bad.sendall(garbage)
        bad.settimeout(5)
        try:
            while bad.recv(65536):
                pass
        except (TimeoutError, ConnectionResetError):
            pass
        bad.close()
    # A huge declared produce is refused before it is buffered.
    big = socket.create_connection(("127.0.0.1", _port(brokerd.native_address)), timeout=5)
    big.sendall(struct.pack(">HH", 1, 4) + b"huge" + struct.pack(">IIIx", 0, 1, 0xFFFFFFF0))
    (error,) = struct.unpack(">H", big.recv(2))
    assert error != 0
    big.close()
    good.sock.sendall(produce_frame("safe", 0, [b"after"]))
    assert good.produce_response()[1] == 1
    assert good.fetch_all("safe", 0) == [b"before", b"after"]
    good.close()


def run_ctl(brokerd: LaunchedBroker, *args: str, stdin: bytes = b"", timeout: float = 20) -> Any:
    return subprocess.run(
        [str(BROKERCTL), "--bootstrap", brokerd.native_address, *args],
        input=stdin,
        capture_output=True,
        env=env(),
        timeout=timeout,
    )


def test_brokerctl_session(brokerd: LaunchedBroker) -> None:
    r = run_ctl(brokerd, "topics", "create", "demo", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    r = run_ctl(brokerd, "produce", "demo", stdin=b"hello\nworld\n")
    assert r.returncode == 0, r.stderr
    assert b"offsets 0..1" in r.stderr
    r = run_ctl(brokerd, "produce", "demo", "--partition", "1", stdin=b"other\n")
    assert r.returncode == 0
    r = run_ctl(brokerd, "consume", "demo")
    assert (r.returncode, r.stdout) == (0, b"hello\nworld\n")
    r = run_ctl(brokerd, "consume", "demo", "--from", "1", "--count", "1")
    assert r.stdout == b"world\n"
    r = run_ctl(brokerd, "consume", "demo", "--from", "latest")
    assert (r.returncode, r.stdout) == (0, b"")
    r = run_ctl(brokerd, "topics", "list")
    assert r.stdout == b"demo\t2\n"
    r = run_ctl(brokerd, "consume", "nosuch")
    assert r.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    r = run_ctl(brokerd, "topics", "create", "demo")
    assert r.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in r.stderr


def test_brokerctl_unreachable(tmp_path: Path) -> None:
    from tests.brokerproc import free_port

    r = subprocess.run(
        [str(BROKERCTL), "--bootstrap", f"127.0.0.1:{free_port()}", "topics", "list"],
        capture_output=True,
        env=env(),
        timeout=20,
    )
    assert r.returncode == 3
    assert b"cannot reach the broker" in r.stderr


def test_fetch_frames_every_kind_of_stored_batch(brokerd: LaunchedBroker) -> None:
    # One brokerd, every path of the type-2 Fetch: equal values (the bulk framing) read
    # from inside a batch and across batches, mixed sizes (the record loop), a value
    # larger than the answer's cap (answered alone), and what a Kafka client stores with
    # keys, headers and compression (the decoded path): all give the values as sent.
    from confluent_kafka import Producer

    c = RawClient(_port(brokerd.native_address))
    equal = [bytes([i % 256]) * 100 for i in range(3000)]
    for start in range(0, 3000, 1000):
        c.sock.sendall(produce_frame("kinds", 0, equal[start : start + 1000]))
        c.produce_response()
    mixed = [b"m" * (i % 300) for i in range(500)]
    c.sock.sendall(produce_frame("kinds", 0, mixed))
    c.produce_response()
    assert c.fetch_all("kinds", 0, 1234) == [*equal, *mixed][1234:]
    c.sock.sendall(fetch_frame("kinds", 0, 999))
    first = c.fetch_response()
    assert isinstance(first, list) and first[:2] == equal[999:1001]
    # The cap counts values: 1 MiB of 100 B values, whole records only.
    assert len(first) == min(len(equal) - 999 + len(mixed), (1 << 20) // 100)

    big = [b"B" * 700_000, b"C" * 700_000]
    for value in big:
        c.sock.sendall(produce_frame("big", 0, [value]))
        c.produce_response()
    c.sock.sendall(fetch_frame("big", 0, 0))
    assert c.fetch_response() == big[:1]  # over the cap with the second: one answer each
    assert c.fetch_all("big", 0) == big

    producer = Producer({"bootstrap.servers": brokerd.bootstrap_servers, "linger.ms": 50,
                         "compression.type": "gzip"})
    kafka_values = [b"k" * (i % 50) for i in range(200)]
    for i, value in enumerate(kafka_values):
        producer.produce("kafka-kinds", value, key=b"key%d" % i, headers=[("h", b"v")],
                         partition=0)
    assert producer.flush(30) == 0
    assert c.fetch_all("kafka-kinds", 0) == kafka_values
    c.close()
