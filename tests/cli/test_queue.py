"""``brokerctl queue work``'s pieces without a broker: the exit-status verdicts, the
acknowledgement ranges, the worker loop's bounds and its release of records it did not
reach, and the share-group tables. The real broker runs it in
tests/native/test_queue_integration.py."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from brokerd.cli.queue import EXIT_REJECT, ack_ranges, kind_of_status, run_queue
from brokerd.native.queue_messages import AckKind, QueueRecord

A, R, J = AckKind.ACCEPT, AckKind.RELEASE, AckKind.REJECT


def test_exit_status_verdicts() -> None:
    assert kind_of_status(0) is A
    assert kind_of_status(EXIT_REJECT) is J
    for status in (1, 2, 75, 127, -9):
        assert kind_of_status(status) is R


def test_ack_ranges_join_consecutive_offsets_of_one_kind() -> None:
    assert ack_ranges([(5, A), (3, A), (4, A), (6, R), (7, A), (9, A)]) == [
        (3, 5, A), (6, 6, R), (7, 7, A), (9, 9, A)
    ]
    assert ack_ranges([]) == []


class FakeClient:
    """Hands out the batches it was given, records every acknowledgement."""

    def __init__(self, batches: list[list[QueueRecord]]) -> None:
        self.batches = batches
        self.acks: list[list[tuple[int, int, AckKind]]] = []
        self.asked: list[int] = []

    def queue_fetch(self, group: str, topic: str, partition: int, *, max_records: int,
                    max_wait_ms: int) -> list[QueueRecord]:
        self.asked.append(max_records)
        return self.batches.pop(0) if self.batches else []

    def queue_acknowledge(self, group: str, topic: str, partition: int,
                          ranges: list[tuple[int, int, AckKind]]) -> None:
        self.acks.append(list(ranges))


def args(**kw: Any) -> argparse.Namespace:
    base: dict[str, Any] = dict(group="g", topic="t", partition=0, batch=100, max_records=None,
                                timeout=None, exec_command=None, print_offsets=False)
    return argparse.Namespace(**{**base, **kw})


def records(*offsets: int) -> list[QueueRecord]:
    return [QueueRecord(o, 1, b"", b"v%d" % o) for o in offsets]


def test_prints_accepts_and_stops_at_max_records() -> None:
    client = FakeClient([records(0, 1, 2), records(3, 4)])
    out = io.BytesIO()
    assert run_queue(client, args(max_records=4), out) == 0  # type: ignore[arg-type]
    assert out.getvalue() == b"v0\nv1\nv2\nv3\nv4\n"
    assert client.acks == [[(0, 2, A)], [(3, 4, A)]]
    assert client.asked == [4, 1]  # never asks for more than is left


def test_stops_after_timeout_without_records() -> None:
    now = [0.0]

    class Idle(FakeClient):
        def queue_fetch(self, *a: Any, **kw: Any) -> list[QueueRecord]:
            now[0] += kw["max_wait_ms"] / 1000
            return super().queue_fetch(*a, **kw)

    client = Idle([])
    assert run_queue(client, args(timeout=2.5), io.BytesIO(), clock=lambda: now[0]) == 0  # type: ignore[arg-type]
    assert 2.5 <= now[0] < 3.0


def test_the_timeout_counts_from_the_last_record_handled() -> None:
    now = [0.0]

    class Slow(io.BytesIO):
        def write(self, data: Any) -> int:
            now[0] += 2.0  # each record takes 2 s to handle
            return super().write(data)

    class Idle(FakeClient):
        def queue_fetch(self, *a: Any, **kw: Any) -> list[QueueRecord]:
            got = super().queue_fetch(*a, **kw)
            if not got:
                now[0] += kw["max_wait_ms"] / 1000
            return got

    client = Idle([records(0, 1), records(2)])
    out = Slow()
    assert run_queue(client, args(timeout=2.5), out, clock=lambda: now[0]) == 0  # type: ignore[arg-type]
    # Handling took 6 s, longer than the timeout: the second fetch still ran.
    assert out.getvalue() == b"v0\nv1\nv2\n"
    assert 8.5 <= now[0] < 9.0


def test_records_not_reached_are_released_when_handling_fails() -> None:
    class Broken(io.BytesIO):
        def write(self, data: Any) -> int:
            if b"v1" in data:
                raise BrokenPipeError
            return super().write(data)

    client = FakeClient([records(0, 1, 2)])
    with pytest.raises(BrokenPipeError):
        run_queue(client, args(), Broken())  # type: ignore[arg-type]
    assert client.acks == [[(0, 0, A), (1, 2, R)]]
