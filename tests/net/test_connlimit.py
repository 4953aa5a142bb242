"""Connection caps (``brokerd.net.connlimit``): per listener, and per client address across
both listeners (``--max-connections-per-ip``, ``--max-connections-per-ip-overrides``), in
unit tests and against a real broker (connections from 127.0.0.1 and 127.0.0.2, both
loopback addresses on Linux)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from brokerd.net.connlimit import (
    AddressLimits,
    ConnectionLimit,
    default_per_address,
    parse_overrides,
)
from brokerd.tap import Options

from tests.brokerproc import BrokerProcess
from tests.figures import record


class AddressLimitTests(SynchronousTestCase):
    def test_one_address_is_capped_across_listeners(self) -> None:
        addresses = AddressLimits(2)
        native = ConnectionLimit(10, "native listener", addresses)
        kafka = ConnectionLimit(10, "kafka listener", addresses)
        self.assertTrue(native.admit("10.0.0.1"))
        self.assertTrue(kafka.admit("10.0.0.1"))
        self.assertFalse(native.admit("10.0.0.1"))
        self.assertFalse(kafka.admit("10.0.0.1"))
        self.assertTrue(kafka.admit("10.0.0.2"))  # another address is not affected
        self.assertEqual((native.open, kafka.open, addresses.refused), (1, 2, 2))
        native.release("10.0.0.1")
        self.assertTrue(kafka.admit("10.0.0.1"))

    def test_overrides_and_zero(self) -> None:
        addresses = AddressLimits(1, {"10.0.0.1": 3, "10.0.0.9": 0})
        limit = ConnectionLimit(None, "listener", addresses)
        self.assertEqual([limit.admit("10.0.0.1") for _ in range(4)], [True] * 3 + [False])
        self.assertFalse(limit.admit("10.0.0.9"))
        self.assertTrue(limit.admit("10.0.0.2"))
        self.assertFalse(limit.admit("10.0.0.2"))

    def test_connections_without_an_address_are_not_counted(self) -> None:
        limit = ConnectionLimit(None, "listener", AddressLimits(0))
        self.assertTrue(limit.admit(""))  # a UNIX socket

    def test_parse_overrides(self) -> None:
        self.assertEqual(parse_overrides("10.0.0.1:5, ::1:7,[fe80::1]:0,"),
                         {"10.0.0.1": 5, "::1": 7, "fe80::1": 0})
        for bad in ("10.0.0.1", "broker.example:5", "10.0.0.1:x", "10.0.0.1:-1", ":4"):
            with self.assertRaises(ValueError, msg=bad):
                parse_overrides(bad)

    def test_default_scales_with_the_listener_cap(self) -> None:
        self.assertEqual(default_per_address(1024), 512)
        self.assertEqual(default_per_address(200), 100)
        self.assertEqual(default_per_address(100), 64)
        self.assertEqual(default_per_address(3), 3)
        self.assertIsNone(default_per_address(None))


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


def test_options() -> None:
    assert parse().settings.limits.per_address == 512
    assert parse("--max-connections=0").settings.limits.per_address is None
    custom = parse("--max-connections-per-ip=7",
                   "--max-connections-per-ip-overrides=127.0.0.2:9").settings.limits
    assert (custom.per_address, custom.per_address_overrides) == (7, {"127.0.0.2": 9})
    for bad in (("--max-connections-per-ip=0",), ("--max-connections-per-ip=-1",),
                ("--max-connections-per-ip-overrides=host:1",)):
        with pytest.raises(usage.UsageError):
            parse(*bad)


# -- a real broker --------------------------------------------------------------------


def connect_from(source: str, port: int) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def served(s: socket.socket) -> bool:
    """Whether the broker answers a native ListTopics (type 5) on ``s``."""
    try:
        s.sendall(b"\x00\x05")
        return bool(s.recv(64))
    except OSError:
        return False


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for s in opened:
        s.close()


def test_one_address_cannot_take_every_slot(make_broker: object,
                                            sockets: list[socket.socket]) -> None:
    """--max-connections-per-ip 20 on listeners of 40 slots: 127.0.0.1, counted across
    both listeners, gets 20 and no more, 127.0.0.2 is still served, and an override lets
    127.0.0.3 hold 25."""
    proc: BrokerProcess = make_broker(  # type: ignore[operator]
        "--max-connections=40", "--max-connections-per-ip=20",
        "--max-connections-per-ip-overrides=127.0.0.3:25",
    )
    assert proc.kafka_port is not None
    # The harness's readiness probes are closed and counted out.
    proc.until_connections(0, "native")
    proc.until_connections(0, "kafka")
    # 127.0.0.1 across both listeners: 10 native + 10 Kafka fill its share.
    for port in [proc.native_port] * 10 + [proc.kafka_port] * 10:
        sockets.append(connect_from("127.0.0.1", port))
    assert all(served(s) for s in sockets[:10])
    extra = connect_from("127.0.0.1", proc.native_port)
    with contextlib.suppress(ConnectionResetError):
        assert extra.recv(1) == b"", "a connection beyond the address's limit is closed"
    extra.close()
    # Another address still gets in, while the first holds all it may.
    other = connect_from("127.0.0.2", proc.native_port)
    sockets.append(other)
    assert served(other)
    # The override lets 127.0.0.3 hold more than the default.
    overridden = [connect_from("127.0.0.3", proc.native_port) for _ in range(19)]
    sockets.extend(overridden)
    assert served(overridden[-1])
    record("one address cannot take every slot",
           "127.0.0.1 held 20 of 40 slots, the 21st closed at once; 127.0.0.2 served")
    sockets.pop(0).close()
    proc.until_connections(10 + 1 + 19 - 1, "native")  # 127.0.0.1, .2 and .3, one closed
    again = connect_from("127.0.0.1", proc.native_port)
    sockets.append(again)
    assert served(again)  # a slot freed by a close is reusable
    assert "refusing more" in proc.log()


def test_the_default_leaves_room_for_other_addresses(make_broker: object,
                                                    sockets: list[socket.socket]) -> None:
    """At --max-connections 200, the default gives one address 100 slots: the 101st from
    127.0.0.1 is refused, 127.0.0.2 is served."""
    proc: BrokerProcess = make_broker(  # type: ignore[operator]
        "--max-connections=200", kafka=False
    )
    proc.until_connections(0)
    for _ in range(100):
        sockets.append(connect_from("127.0.0.1", proc.native_port))
    assert served(sockets[-1])
    extra = connect_from("127.0.0.1", proc.native_port)
    with contextlib.suppress(ConnectionResetError):
        assert extra.recv(1) == b""
    extra.close()
    other = connect_from("127.0.0.2", proc.native_port)
    sockets.append(other)
    assert served(other)
