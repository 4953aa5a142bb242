# -*- test-case-name: tests.core.test_policy -*-
"""The ``--fsync`` setting, parsed; what each mode promises is in
``docs/operations.md`` ("Durability").

``always``: an append is answered, and readable, only after ``fdatasync`` (appends that
arrive during a sync share the next one). ``interval:MS``: answered once written to the
kernel; dirty partitions are synced every MS milliseconds. ``never``: as ``interval``
without the timer. Parsing only: the writer and the timers apply it.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class FsyncPolicy:
    """The ``--fsync`` setting: ``always``, ``interval:MS`` or ``never``."""

    mode: Literal["always", "interval", "never"]
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        if text == "always":
            return cls("always")
        if text == "never":
            return cls("never")
        if text.startswith("interval:"):
            try:
                ms = int(text.split(":", 1)[1])
            except ValueError:
                ms = 0
            if ms > 0:
                return cls("interval", ms)
        raise ValueError(f"--fsync must be always, never or interval:MS (MS > 0), not {text!r}")

    @property
    def sync_every_append(self) -> bool:
        return self.mode == "always"

    def __str__(self) -> str:
        return f"interval:{self.interval_ms}" if self.mode == "interval" else self.mode

    def flush_defaults(self) -> dict[str, str]:
        """The broker-level ``flush.messages`` / ``flush.ms`` this mode amounts to, as
        DescribeConfigs reports them (Kafka's defaults for the rest): ``always`` is a
        sync per record, ``interval:MS`` a sync every MS."""
        if self.mode == "always":
            return {"flush.messages": "1"}
        if self.mode == "interval":
            return {"flush.ms": str(self.interval_ms)}
        return {}


#: ``--fsync`` when the operator does not say: every append synced before its answer.
DEFAULT_FSYNC = FsyncPolicy("always")

#: Kafka's "never" for ``flush.messages``.
_NEVER = 2**63 - 1


@attrs.frozen
class FlushRule:
    """When one partition syncs: its topic's ``flush.messages`` / ``flush.ms``
    overrides, else the broker's ``--fsync``.

    ``every_append``: each append is synced before it is answered (``--fsync always``,
    ``flush.messages=1`` or ``flush.ms=0``). ``messages``: sync in the job whose appends
    bring the records written since the last sync to this many. ``timer_ms``: sync this
    long after the first append not yet synced (a ``flush.ms`` override; the broker's
    ``interval:MS`` timer serves the partitions without one).
    """

    every_append: bool
    messages: int | None = None
    timer_ms: int | None = None


def flush_rule(
    policy: FsyncPolicy, flush_messages: int | None, flush_ms: int | None
) -> FlushRule:
    """The rule of a partition whose topic overrides ``flush_messages`` / ``flush_ms``
    (None: no override). An override replaces the broker's setting, as a Kafka topic's
    ``flush.*`` replaces ``log.flush.*``: it may make a topic more durable than the
    broker (``flush.messages=1`` under ``--fsync never``) or less (``flush.messages=1000``
    under ``--fsync always``)."""
    messages = flush_messages
    if messages is None and policy.mode == "always":
        messages = 1
    if messages is not None and messages >= _NEVER:
        messages = None
    timer_ms = None if flush_ms is None or flush_ms >= _NEVER else flush_ms
    every = messages == 1 or timer_ms == 0
    return FlushRule(every, None if every else messages, None if every else timer_ms)
