"""Tests for the Kafka listener factory's parts: checked on construction, evolved per
use, and read by the factory and its connections."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from brokerd.kafka.listener.factory_parts import (
    DEFAULT_LIMITS,
    ConnectionLimits,
    ListenerEdge,
)
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.net.request_budget import RequestBudget

from tests.fake_core import FakeCore
from tests.kafka.listener.test_protocol import FakeCoordinator


@pytest.mark.parametrize("field", ["max_frame_bytes", "sasl_max_receive_bytes"])
def test_a_size_that_is_not_positive_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        attrs.evolve(DEFAULT_LIMITS, **{field: 0})


def test_evolving_one_limit_keeps_the_others() -> None:
    limits = attrs.evolve(DEFAULT_LIMITS, idle_timeout=None)
    assert limits.idle_timeout is None
    assert attrs.evolve(limits, idle_timeout=DEFAULT_LIMITS.idle_timeout) == DEFAULT_LIMITS
    assert ConnectionLimits() == DEFAULT_LIMITS


def test_the_factory_reads_each_part(tmp_path: Path) -> None:
    clock = task.Clock()
    groups = FakeCoordinator(str(tmp_path))
    factory = KafkaFactory(
        FakeCore(), KafkaCoordinators(groups), clock=clock,
        advertised_host="broker.example", advertised_port=19092,
        limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=4096, max_connections=1,
                            idle_timeout=5.0),
        edge=ListenerEdge(request_budget=RequestBudget(1024)),
    )
    # The request budget is smaller than the frame limit: no frame could be reserved.
    assert factory.frame_limit(authenticated=True) == 1024
    first = factory.buildProtocol(None)
    assert first is not None
    transport = StringTransport()
    first.makeConnection(transport)
    assert factory.buildProtocol(None) is None  # max_connections
    clock.advance(5.0)  # idle_timeout
    assert transport.disconnecting
    groups.close()
