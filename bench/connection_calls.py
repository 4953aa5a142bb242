"""Python calls per small request through a connection's ``dataReceived``: a robust
figure while others load the machine (``sys.setprofile`` counts ``call`` events, Python
functions, and ``c_call`` events, built-ins), for a Kafka ApiVersions, a Kafka Produce
(acks=1, one 100-byte batch) and a native produce, each answered at once by a fake core
on a ``StringTransport`` (the request's whole reactor-thread path: decode, dispatch,
handler, encode, write). Run: ``PYTHONPATH=. python -m bench.connection_calls``."""

from __future__ import annotations

import collections
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport


def count(fn: Callable[[], object]) -> collections.Counter[str]:
    calls: collections.Counter[str] = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            calls[event] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def kafka() -> dict[str, collections.Counter[str]]:
    from brokerd.kafka.listener.protocol import KafkaFactory
    from brokerd.kafka.server.coordinators import KafkaCoordinators
    from brokerd.kafka.wire.codec import ApiKey, RequestHeader
    from brokerd.kafka.wire.requests import apis

    from tests.fake_core import FakeCore
    from tests.kafka.listener.test_protocol import FakeCoordinator, batch

    groups = FakeCoordinator(tempfile.mkdtemp(prefix="brokerd-calls-"))
    factory = KafkaFactory(FakeCore(), KafkaCoordinators(groups), clock=task.Clock(),
                           advertised_host="h", advertised_port=1)
    proto = factory.buildProtocol(None)
    assert proto is not None
    transport = StringTransport(peerAddress=IPv4Address("TCP", "10.1.2.3", 5555))
    proto.makeConnection(transport)

    def frame(correlation: int, key: ApiKey, version: int, body: Any) -> bytes:
        return apis.encode_request(RequestHeader(int(key), version, correlation, "c"), body)

    def produce(correlation: int) -> bytes:
        return frame(correlation, ApiKey.PRODUCE, 8, apis.ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=1000,
            topic_data=(apis.ProduceTopicData(name="t", partition_data=(
                apis.ProducePartitionData(index=0, records=batch(100)),)),)))

    def api_versions(correlation: int) -> bytes:
        return frame(correlation, ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())

    out = {}
    for name, make in (("kafka ApiVersions", api_versions), ("kafka Produce acks=1", produce)):
        for i in range(3):  # warm: caches, the topic created
            proto.dataReceived(make(100 + i))
            transport.clear()
        data = make(7)
        out[name] = count(lambda data=data: proto.dataReceived(data))  # type: ignore[misc]
        assert transport.value(), name
        transport.clear()
    groups.close()
    return out


def native() -> dict[str, collections.Counter[str]]:
    from brokerd.native.protocol import NativeFactory

    from tests.native_helpers import FakeCore, append_info, produce_frame

    core = FakeCore()
    proto = NativeFactory(core, clock=task.Clock()).buildProtocol(None)
    assert proto is not None
    transport = StringTransport()
    proto.makeConnection(transport)
    core.auto = {"produce_values": append_info(0)}
    data = produce_frame("t", 0, [b"v"])
    for _ in range(3):
        proto.dataReceived(data)
        transport.clear()
    calls = count(lambda: proto.dataReceived(data))
    assert transport.value()
    return {"native produce": calls}


def main() -> None:
    for name, calls in {**kafka(), **native()}.items():
        print(f"{name:22s} call={calls['call']:4d} c_call={calls['c_call']:4d} "
              f"total={calls['call'] + calls['c_call']}")


if __name__ == "__main__":
    main()
