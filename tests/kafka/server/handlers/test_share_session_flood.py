"""Share sessions flooded: an attacker opening more share sessions than the broker holds
(``group.share.max.share.sessions``, 2,000), in share groups of its own, while a victim's
confluent-kafka ShareConsumer reads and acknowledges. The attacker's sessions beyond the
cap are refused (SHARE_SESSION_LIMIT_REACHED); the victim's session goes on, so its
acknowledgements land and no record of its is delivered twice.

The attacker speaks the protocol by hand (a few connections, requests pipelined): each
member joins with ShareGroupHeartbeat, then opens a session with a ShareFetch of epoch 0.
The cap is the broker's ``--group-share-max-share-sessions``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.share.coordinator import MAX_MEMBERS, MAX_SESSIONS
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import share as sm

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.kafka.server.handlers.test_share_clients import consumer, make_topic, produce
from tests.kafka_helpers import RawKafka

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]

RECORDS = 1500
#: Sessions the attacker tries to open: past the cap by 100 (the victim holds one).
ATTACKS = MAX_SESSIONS + 100
CONNECTIONS = 4
#: The victim's lock: a lost acknowledgement shows up as a redelivery this much later.
LOCK_MS = 8000
DEADLINE = 90.0


@pytest.fixture
def attackers(broker: BrokerProcess) -> Iterator[list[RawKafka]]:
    """The attacker's connections, open until the test ends (its sessions with them)."""
    conns = [RawKafka(broker, timeout=60) for _ in range(CONNECTIONS)]
    try:
        yield conns
    finally:
        for conn in conns:
            conn.close()


def configure_victim(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", str(LOCK_MS)),
        )
    ]
    res = ConfigResource(ResourceType.GROUP, "victim", incremental_configs=entries)
    for f in admin.incremental_alter_configs([res]).values():
        f.result(10)


def open_attacker_sessions(conns: list[RawKafka], count: int) -> tuple[int, int]:
    """Join ``count`` members, in groups as full as groups get, and open a share session
    for each, over ``conns``: (sessions opened, sessions refused with 133)."""
    members = [(f"attack-{i // MAX_MEMBERS}", f"member-{i}") for i in range(count)]
    opened = refused = 0
    for start in range(0, count, 200):
        batch = list(enumerate(members[start:start + 200]))
        for i, (group, member) in batch:
            conns[i % len(conns)].send(
                ApiKey.SHARE_GROUP_HEARTBEAT, 1, sm.ShareGroupHeartbeatRequest(
                    group_id=group, member_id=member, member_epoch=0,
                    subscribed_topic_names=("junk",)))
        for i, _ in batch:
            joined = conns[i % len(conns)].receive()
            assert joined.error_code == 0, joined
        for i, (group, member) in batch:
            conns[i % len(conns)].send(ApiKey.SHARE_FETCH, 1, sm.ShareFetchRequest(
                group_id=group, member_id=member, share_session_epoch=0, max_wait_ms=0))
        for i, _ in batch:
            fetched = conns[i % len(conns)].receive()
            if fetched.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
                refused += 1
            else:
                assert fetched.error_code == 0, fetched
                opened += 1
    return opened, refused


def test_a_victim_consumer_beside_more_sessions_than_the_broker_holds(
    broker: BrokerProcess, attackers: list[RawKafka]
) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "work")
    make_topic(bs, "junk")
    configure_victim(bs)
    # Batches of 100: a ShareFetch acquires whole batches, and the victim must still have
    # records to read once the attack starts.
    produce(bs, "work", RECORDS, batch=100)
    victim = consumer(bs, "victim")
    victim.subscribe(["work"])
    seen: dict[int, int] = {}

    def poll(seconds: float) -> None:
        for msg in victim.poll(timeout=seconds) or ():
            if msg.error() is None:
                seen[msg.offset()] = seen.get(msg.offset(), 0) + 1

    end = time.monotonic() + DEADLINE
    while not seen:  # the victim's session is open and in use
        assert time.monotonic() < end, "the victim never read"
        poll(1.0)
    before = len(seen)
    assert before < RECORDS, "the victim read everything before the attack"
    opened, refused = open_attacker_sessions(attackers, ATTACKS)

    def start_offset() -> int:
        with broker.client() as native:
            (part,) = native.describe_share_group("victim")["partitions"]
        start = part["start_offset"]
        assert isinstance(start, int)
        return start

    # Done when every record is acknowledged (the group's start offset passed them all):
    # an acknowledgement lost with the victim's session would hold it back until the
    # record's lock expired and the record came again.
    while len(seen) < RECORDS or start_offset() < RECORDS:
        assert time.monotonic() < end, f"the victim read {len(seen)} of {RECORDS}"
        poll(0.5)
    victim.close()
    redelivered = sum(count - 1 for count in seen.values())
    record(
        "victim share consumer beside 2,000+ attacker share sessions",
        f"{redelivered} of {RECORDS} records redelivered; attacker: {refused} of "
        f"{ATTACKS} sessions refused (133), {opened} opened; {before} read before",
    )
    assert redelivered == 0
    assert sorted(seen) == list(range(RECORDS))
    # The victim's session counts: beyond the cap less one, every attempt is refused.
    assert (opened, refused) == (MAX_SESSIONS - 1, ATTACKS - MAX_SESSIONS + 1)


def test_the_cap_is_the_brokers_option(tmp_path: Path) -> None:
    proc = BrokerProcess(
        tmp_path / "data", args=("--group-share-max-share-sessions", "3")
    ).start()
    try:
        make_topic(proc.kafka_bootstrap, "junk")
        with RawKafka(proc) as conn:
            assert open_attacker_sessions([conn], 5) == (3, 2)
    finally:
        proc.stop()
