"""The per-topic flush rule: ``flush.messages`` / ``flush.ms`` against ``--fsync``, with Kafka's
override semantics."""

from __future__ import annotations

from brokerd.core.policy import FlushRule, FsyncPolicy, flush_rule
from brokerd.storage.config.topic_config import (
    LONG_MAX,
)

# -- flush.messages / flush.ms ------------------------------------------------------------


def test_flush_rule_follows_kafkas_override_semantics() -> None:
    always, never = FsyncPolicy("always"), FsyncPolicy("never")
    interval = FsyncPolicy("interval", 200)
    assert flush_rule(always, None, None) == FlushRule(True)
    assert flush_rule(never, None, None) == FlushRule(False)
    assert flush_rule(interval, None, None) == FlushRule(False)
    assert flush_rule(never, 1, None) == FlushRule(True)
    assert flush_rule(never, None, 0) == FlushRule(True)
    assert flush_rule(never, 100, 5000) == FlushRule(False, 100, 5000)
    # An override replaces the broker's setting, also when that weakens it.
    assert flush_rule(always, 1000, None) == FlushRule(False, 1000)
    # flush.ms alone leaves the broker's "sync every record" in force.
    assert flush_rule(always, None, 5000) == FlushRule(True)
    assert flush_rule(never, LONG_MAX, LONG_MAX) == FlushRule(False)
    assert always.flush_defaults() == {"flush.messages": "1"}
    assert interval.flush_defaults() == {"flush.ms": "200"}
    assert never.flush_defaults() == {}
