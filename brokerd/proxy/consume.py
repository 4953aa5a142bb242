# -*- test-case-name: tests.proxy.test_site_broker -*-
"""A consumer instance's records call: where each assigned partition is read from, the
reads through the core's read API (decoded committed records, as the native fetch reads),
and the wait for data when there is none yet.

A partition without a position starts at the group's committed offset, else at
``auto.offset.reset``; a position out of the log's range (retention deleted it) is reset
the same way. The answer holds at most ``max_bytes`` (capped by
:data:`~brokerd.proxy.limits.MAX_RECORDS_BYTES`) of keys and values plus
:data:`RECORD_OVERHEAD` per record, but always at least one record when there is one,
so a record larger than the budget is not stuck. Partitions are read in turn from where
the previous call stopped, so one busy partition does not starve the others. Nothing is
found: the call parks until data is appended past the positions or its ``timeout``
passes (capped by :data:`~brokerd.proxy.limits.MAX_RECORDS_WAIT_MS`).
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.core.api import CoreApi
from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.proxy.errors import ProxyError, from_broker
from brokerd.proxy.group_face import TopicPartition
from brokerd.proxy.instances import ConsumerInstance, ConsumerInstances, OffsetReset
from brokerd.storage.types import COMMITTED_RECORDS, LogRead, Record

Fetched = list[tuple[str, int, Record]]

#: What one record costs of a records call's budget beyond its key and value: its JSON
#: fields (topic, partition, offset, the names), so empty records are bounded too.
RECORD_OVERHEAD = 64


async def reset_position(core: CoreApi, tp: TopicPartition, reset: OffsetReset) -> int:
    """Where ``auto.offset.reset`` puts a partition's position."""
    if reset is OffsetReset.NONE:
        raise ProxyError(422, 42206, f"no committed offset for {tp[0]}-{tp[1]} and "
                                     "auto.offset.reset is none")
    start, end = await core.reads.list_offsets(*tp, read_committed=True)
    return start if reset is OffsetReset.EARLIEST else end


async def fill_positions(
    core: CoreApi, instances: ConsumerInstances, instance: ConsumerInstance
) -> None:
    """A position for every assigned partition that has none."""
    missing = [tp for tp in sorted(instance.assignment) if tp not in instance.positions]
    if not missing:
        return
    committed = instances.committed(instance, missing)
    for tp in missing:
        found = committed.get(tp)
        if found is not None:
            instance.positions[tp] = found[0]
        else:
            try:
                instance.positions[tp] = await reset_position(
                    core, tp, instance.config.auto_offset_reset)
            except UnknownTopicOrPartition:
                continue


async def read_records(
    core: CoreApi,
    instances: ConsumerInstances,
    instance: ConsumerInstance,
    *,
    max_bytes: int,
    wait_ms: int,
    min_bytes: int,
) -> Fetched:
    """Records from the instance's positions (moved past them)."""
    await fill_positions(core, instances, instance)
    fetched, seen = await _read_once(core, instance, max_bytes)
    if fetched or wait_ms <= 0 or not instance.positions:
        return fetched
    positions = [(t, p, o) for (t, p), o in sorted(instance.positions.items())]
    try:
        await core.wait_for_data(positions, min_bytes=max(1, min_bytes), max_wait_ms=wait_ms,
                                 seen=seen)
    except Exception as e:
        raise from_broker(e) from None
    if instance.state.value == "closed":
        return []
    await fill_positions(core, instances, instance)
    fetched, _seen = await _read_once(core, instance, max_bytes)
    return fetched


async def _read_once(
    core: CoreApi, instance: ConsumerInstance, max_bytes: int
) -> tuple[Fetched, dict[TopicPartition, int]]:
    fetched: Fetched = []
    seen: dict[TopicPartition, int] = {}
    budget = max_bytes
    order: Sequence[TopicPartition] = sorted(instance.positions)
    if order:
        # Start after the partition the last call started with (round robin).
        shift = instance.next_start % len(order)
        order = [*order[shift:], *order[:shift]]
        instance.next_start = shift + 1
    for tp in order:
        if budget <= 0 and fetched:
            break
        position = instance.positions.get(tp)
        if position is None:
            continue
        read = await _read(core, instance, tp, position, max(budget, 1))
        if read is None:
            continue
        seen[tp] = read.high_watermark
        for record in read.decoded:
            if record.offset < position:
                continue
            size = len(record.key or b"") + len(record.value or b"") + RECORD_OVERHEAD
            if fetched and size > budget:
                budget = 0
                break
            fetched.append((tp[0], tp[1], record))
            budget -= size
            position = record.offset + 1
        if position > instance.positions.get(tp, position):
            instance.positions[tp] = position
            instance.uncommitted[tp] = position
    return fetched, seen


async def _read(
    core: CoreApi, instance: ConsumerInstance, tp: TopicPartition, position: int, budget: int
) -> LogRead | None:
    for _attempt in range(2):
        try:
            return await _as_deferred(core.reads.read(tp[0], tp[1], position, budget,
                                                COMMITTED_RECORDS))
        except OffsetOutOfRange:
            position = await reset_position(core, tp, instance.config.auto_offset_reset)
            instance.positions[tp] = position
        except UnknownTopicOrPartition:
            return None
        except ProxyError:
            raise
        except Exception as e:
            raise from_broker(e) from None
    return None


async def _as_deferred(result: object) -> LogRead:
    from twisted.internet.defer import Deferred

    if isinstance(result, Deferred):
        return await result  # type: ignore[no-any-return]
    assert isinstance(result, LogRead)
    return result
