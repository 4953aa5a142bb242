"""The core's reads (``brokerd/core/fetcher.py``), over a real log directory with a
counting read pool: what is answered at once, what goes to the pool, and the offset
lookups."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from twisted.internet import defer

from brokerd.core.fetcher import Fetcher
from brokerd.core.stopping import StopLatch
from brokerd.core.topics import Partition, TopicRegistry
from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.types import LogRead, PartitionOffsets

from tests.deferreds import result_of
from tests.read_specs import BYTES, COMMITTED, COMMITTED_RECORDS, REFERENCE, span_of

BIG = 1 << 20


class CountingPool:
    """A read pool that runs each job at once and names it."""

    def __init__(self) -> None:
        self.jobs: list[str] = []

    def __call__(self, f: Callable[..., Any], *args: Any, **kw: Any) -> defer.Deferred[Any]:
        self.jobs.append(f.__name__)
        return defer.maybeDeferred(f, *args, **kw)




@pytest.fixture
def parts(tmp_path: Path) -> Iterator[tuple[Fetcher, CountingPool, LogDirectory]]:
    logdir = LogDirectory.open(str(tmp_path), LogConfig())
    logdir.topic_changes.create_topic("t", 1)
    registry = TopicRegistry(
        logdir,
        run_write=lambda f, *a, **kw: defer.maybeDeferred(f, *a, **kw),
        # The fetcher reads only the log of a partition.
        make_partition=lambda topic, index, log: Partition(
            topic, index, log, cast(Any, None), cast(Any, None)
        ),
        forget=lambda key: None,
        stop_latch=StopLatch(),
    )
    pool = CountingPool()
    yield Fetcher(registry, pool), pool, logdir
    logdir.close()


def fill(logdir: LogDirectory, *batches: list[bytes]) -> None:
    plog = logdir.get("t", 0)
    for values in batches:
        plog.append_values(values, timestamp_ms=0)
    plog.flush()
    plog.publish()


def test_a_partition_not_open_yet_is_opened_then_read(parts: Any) -> None:
    fetcher, _pool, logdir = parts
    fill(logdir, [b"a"])
    answer = fetcher.read("t", 0, 0, BIG, COMMITTED_RECORDS)
    assert isinstance(answer, defer.Deferred)
    assert [r.value for r in result_of(answer).decoded] == [b"a"]
    with pytest.raises(UnknownTopicOrPartition):
        result_of(cast(defer.Deferred[Any], fetcher.read("nope", 0, 0, BIG, BYTES)))


def test_what_is_answered_at_once_and_what_goes_to_the_pool(parts: Any) -> None:
    fetcher, pool, logdir = parts
    fill(logdir, [b"a", b"b"], [b"c"])
    result_of(cast(defer.Deferred[Any], fetcher.read("t", 0, 3, BIG, BYTES)))  # opens it
    # Nothing new: at once, empty, whatever the form.
    for spec in (BYTES, REFERENCE, COMMITTED, COMMITTED_RECORDS):
        at_end = fetcher.read("t", 0, 3, BIG, spec)
        assert isinstance(at_end, LogRead) and at_end.records == b"" and at_end.decoded == ()
        assert at_end.high_watermark == 3
    # Just appended, by reference or decoded: from memory, no pool job.
    stored = fetcher.read("t", 0, 2, BIG, REFERENCE)
    span = span_of(stored if isinstance(stored, LogRead) else None)
    assert span is not None
    span.release()
    decoded = fetcher.read("t", 0, 1, BIG, COMMITTED_RECORDS)
    assert isinstance(decoded, LogRead) and [r.value for r in decoded.decoded] == [b"b", b"c"]
    assert pool.jobs == []
    # By value: the pool reads it.
    by_value = fetcher.read("t", 0, 0, BIG, BYTES)
    assert isinstance(by_value, defer.Deferred) and result_of(by_value).records != b""
    assert pool.jobs == ["read"]
    # Out of range of an open partition: raised at once.
    with pytest.raises(OffsetOutOfRange):
        fetcher.read("t", 0, 4, BIG, REFERENCE)


def test_offset_lookups(parts: Any) -> None:
    fetcher, pool, logdir = parts
    fill(logdir, [b"a", b"b"])
    assert result_of(fetcher.offsets("t", 0)) == PartitionOffsets(0, 2, 2)
    assert result_of(fetcher.list_offsets("t", 0)) == (0, 2)
    assert result_of(fetcher.list_offsets("t", 0, read_committed=True)) == (0, 2)
    assert result_of(fetcher.offset_for_timestamp("t", 0, 0)) == (0, 0)
    assert result_of(fetcher.max_timestamp_offset("t", 0)) == (0, 0)
    assert pool.jobs == ["offset_for_timestamp", "max_timestamp_offset"]
