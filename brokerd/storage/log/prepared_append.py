"""A produce of client batches in two steps: prepared against the configs, then stored.

Kafka's ``UnifiedLog.appendAsLeader`` validates an append and updates the producer state
in one call inside the log. brokerd splits it where its threads split:

- :func:`prepare_batches` runs in the reactor thread, before the append is queued: the
  topic's rules that need no log state (``max.message.bytes``, keys on a compacted topic,
  ``message.timestamp.*``; ``log/produce_checks.py``, ``log/timestamp_checks.py``). Its
  :class:`PreparedBatches` is what the core queues.
- :func:`stored_form` runs in the write job, inside
  :meth:`~brokerd.storage.log.partition_log.PartitionLog.append_prepared` (which checks
  and updates the producer state around it, under the log's write lock): the batches as
  the log stores them, in the topic's ``compression.type`` and, on a LogAppendTime topic,
  stamped with the append time.

What it does not do: parse or validate the batches themselves (``record/header.py``
did, before), decide who may write (producer state, the core's transaction verifier), or
any I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.produce_checks import check_batches
from brokerd.storage.log.recompress import recompress
from brokerd.storage.log.timestamp_checks import check_timestamps
from brokerd.storage.record.append_time import stamp_log_append_time
from brokerd.storage.record.header import BatchHeader

__all__ = ["PreparedBatches", "prepare_batches", "stored_form"]


@attrs.frozen
class PreparedBatches:
    """Validated client batches (``headers`` from ``parse_batches(data)``) that the
    topic's configs accept, waiting for their write job."""

    data: bytes
    headers: tuple[BatchHeader, ...]
    #: The producer id of the batches (-1: not an idempotent producer's); a field, read
    #: on every append.
    producer_id: int = attrs.field(
        default=attrs.Factory(lambda self: self.headers[0].producer_id, takes_self=True)
    )

    @property
    def transactional(self) -> bool:
        return any(h.is_transactional for h in self.headers)


def prepare_batches(
    config: LogConfig,
    data: bytes,
    headers: Sequence[BatchHeader],
    *,
    topic: str,
    partition: int,
    now_ms: int,
) -> PreparedBatches:
    """The append of ``data`` to ``topic``-``partition`` if ``config`` accepts it; raises
    :class:`RecordTooLarge`, :class:`InvalidRecord` or :class:`InvalidTimestamp`."""
    check_batches(config, data, headers, topic, partition)
    check_timestamps(config, data, headers, now_ms)
    return PreparedBatches(data, tuple(headers))


def stored_form(
    config: LogConfig, prepared: PreparedBatches, now_ms: int
) -> tuple[bytes, Sequence[BatchHeader], int | None]:
    """``(data, headers, log append time)`` as the log stores ``prepared``: recompressed
    to the topic's own ``compression.type``, and on a LogAppendTime topic stamped with
    ``now_ms`` (header and CRC only), which is then the append time Kafka's Produce
    answer reports (None on a CreateTime topic)."""
    data, headers = recompress(config, prepared.data, prepared.headers)
    if config.message_timestamp_type != "LogAppendTime":
        return data, headers, None
    stamped, stamped_headers = stamp_log_append_time(data, headers, now_ms)
    return stamped, stamped_headers, now_ms
