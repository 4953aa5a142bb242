"""The share group handlers on a StringTransport and task.Clock: heartbeats, ShareFetch
with sessions and piggy-backed acknowledgements, ShareAcknowledge, describe, errors."""

from __future__ import annotations

import shutil
import tempfile

from twisted.internet import defer

from brokerd.core.share.service import ShareService
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.share.coordinator import ShareGroupCoordinator
from brokerd.kafka.groups.share.state_service import ShareGroups
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.wire.codec import ZERO_UUID, ApiKey
from brokerd.kafka.wire.messages import consumer_groups as cg
from brokerd.kafka.wire.messages import share as m
from brokerd.storage.stores.share_state import ShareStateStore

from tests.core.share.test_service import batch
from tests.fake_core import BatchLogCore
from tests.kafka.listener.test_protocol import KafkaTestCase


class ShareHandlerCase(KafkaTestCase):
    """A Kafka listener with share groups (topic "t", five records, group "g" reading
    from the earliest); no tests of its own."""

    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t")
        self.topic_id = self.core.topics()["t"].topic_id
        self.log = BatchLogCore(self.clock)
        self.log.add(0, batch(0, 5), 5)
        path = tempfile.mkdtemp(prefix="share-handlers-")
        self.addCleanup(shutil.rmtree, path, True)
        self.store = ShareStateStore.open(path)
        self.addCleanup(self.store.close)
        service = ShareService(
            self.log, self.store, run_write=self.log.run_write, clock=self.clock
        )
        self.service = service
        service.engine.set_overrides("g", {"share.auto.offset.reset": "earliest"})
        coordinator = ShareGroupCoordinator(
            clock=self.clock,
            partition_counts=lambda: {n: t.partitions for n, t in self.core.topics().items()},
            # As the broker wires it: a member gone has its records released.
            on_member_gone=lambda g, mid: defer.ensureDeferred(service.release_member(g, mid)),
            session_timeout_ms=lambda g: 45000,
            heartbeat_interval_ms=lambda g: 5000,
        )
        self.factory = KafkaFactory(
            self.core,  # type: ignore[arg-type]
            KafkaCoordinators(self.groups, shares=ShareGroups(coordinator, service)),
            clock=self.clock,
            advertised_host="broker.example", advertised_port=19092,
        )
        self.proto, self.tr = self.connect()
        self.coordinator = coordinator
        self.addCleanup(coordinator.stop)

    def join(self, member: str = "m1") -> m.ShareGroupHeartbeatResponse:
        self.send(ApiKey.SHARE_GROUP_HEARTBEAT, 1, m.ShareGroupHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=0, subscribed_topic_names=("t",)))
        resp: m.ShareGroupHeartbeatResponse = self.one()
        return resp

    def fetch(self, epoch: int, acks: tuple[m.AcknowledgementBatch, ...] = (),
              member: str = "m1", topic_id: object = None,
              version: int = 2) -> m.ShareFetchResponse:
        """A ShareFetch of at most 2 records: v2 in record-limit mode (1), exactly 2; v1
        (batch-optimized, as v2's mode 0) to the end of the batch holding the second."""
        self.send(ApiKey.SHARE_FETCH, version, m.ShareFetchRequest(
            group_id="g", member_id=member, share_session_epoch=epoch, max_records=2,
            share_acquire_mode=1 if version >= 2 else 0,
            topics=(m.ShareFetchTopic(topic_id=topic_id or self.topic_id, partitions=(
                m.ShareFetchPartition(partition_index=0, acknowledgement_batches=acks),)),),
        ))
        resp: m.ShareFetchResponse = self.one()
        return resp


class ShareHandlerTests(ShareHandlerCase):
    def test_join_fetch_acknowledge(self) -> None:
        hb = self.join()
        assert hb.error_code == 0 and hb.member_epoch == 1
        assert hb.assignment == cg.HeartbeatAssignment(topic_partitions=(
            cg.HeartbeatTopicPartitions(topic_id=self.topic_id, partitions=(0,)),))
        first = self.fetch(0)
        assert first.acquisition_lock_timeout_ms == 30000
        (part,) = first.responses[0].partitions
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in part.acquired_records] == [(0, 1, 1)]
        assert part.records == batch(0, 5)
        ack = m.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(1, 2))
        second = self.fetch(1, (ack,))
        (part,) = second.responses[0].partitions
        assert part.acknowledge_error_code == 0
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in part.acquired_records] == [(1, 1, 2), (2, 2, 1)]
        # Acknowledging what the member does not hold is refused, all of it.
        self.send(ApiKey.SHARE_ACKNOWLEDGE, 1, m.ShareAcknowledgeRequest(
            group_id="g", member_id="m1", share_session_epoch=2, topics=(
                m.ShareFetchTopic(topic_id=self.topic_id, partitions=(m.ShareFetchPartition(
                    partition_index=0, acknowledgement_batches=(m.AcknowledgementBatch(
                        first_offset=1, last_offset=4, acknowledge_types=(1,)),)),)),)))
        ack_resp: m.ShareAcknowledgeResponse = self.one()
        assert ack_resp.responses[0].partitions[0].error_code == 121  # INVALID_RECORD_STATE
        self.send(ApiKey.SHARE_GROUP_DESCRIBE, 1, m.ShareGroupDescribeRequest(
            group_ids=("g", "nope")))
        described: m.ShareGroupDescribeResponse = self.one()
        group, missing = described.groups
        assert group.group_state == "Stable" and group.members[0].member_id == "m1"
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        # One answer per group id, however often it is named.
        self.send(ApiKey.SHARE_GROUP_DESCRIBE, 1, m.ShareGroupDescribeRequest(
            group_ids=("g", "nope", "g", "nope")))
        assert [g.group_id for g in self.one().groups] == ["g", "nope"]

    def test_batch_optimized_acquires_the_whole_batch(self) -> None:
        """Kafka's default acquire mode: MaxRecords 2 of a stored batch of 5 acquires
        the batch to its end, one range, sent as the one stored batch."""
        self.join()
        (part,) = self.fetch(0, version=1).responses[0].partitions
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in part.acquired_records] == [(0, 4, 1)]
        assert part.records == batch(0, 5)
        # Part of the run acknowledged, part released: the released ones come back whole.
        ack = m.AcknowledgementBatch(first_offset=0, last_offset=4,
                                     acknowledge_types=(1, 2, 2, 1, 3))
        (part,) = self.fetch(1, (ack,), version=1).responses[0].partitions
        assert part.acknowledge_error_code == 0
        (part,) = self.fetch(2, version=1).responses[0].partitions
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in part.acquired_records] == [(1, 2, 2)]

    def test_session_errors_and_unknown_members_and_topics(self) -> None:
        assert self.fetch(0).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        self.join()
        assert self.fetch(1).error_code == 122  # SHARE_SESSION_NOT_FOUND
        assert self.fetch(0).error_code == 0
        assert self.fetch(5).error_code == 123  # INVALID_SHARE_SESSION_EPOCH
        unknown = self.fetch(1, topic_id=ZERO_UUID)
        assert any(p.error_code == ErrorCode.UNKNOWN_TOPIC_ID
                   for t in unknown.responses for p in t.partitions)
        self.send(ApiKey.SHARE_ACKNOWLEDGE, 1, m.ShareAcknowledgeRequest(
            group_id="g", member_id="m1", share_session_epoch=0))
        assert self.one().error_code == 123

    def test_a_new_session_beyond_the_cap_is_refused_whole(self) -> None:
        """At the broker's most share sessions a new one gets SHARE_SESSION_LIMIT_REACHED
        (133) for the whole request; the session already there answers as before."""
        self.coordinator.max_sessions = 1
        self.join("m1")
        self.join("m2")
        assert self.fetch(0, member="m1").error_code == 0
        refused = self.fetch(0, member="m2")
        assert refused.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
        assert refused.responses == ()
        ack = m.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(1,))
        (part,) = self.fetch(1, (ack,), member="m1").responses[0].partitions
        assert part.acknowledge_error_code == 0
        assert [(a.first_offset, a.delivery_count) for a in part.acquired_records] == [(2, 1)]

    def test_heartbeat_errors(self) -> None:
        self.send(ApiKey.SHARE_GROUP_HEARTBEAT, 1, m.ShareGroupHeartbeatRequest(
            group_id="g", member_id="x", member_epoch=3))
        assert self.one().error_code == ErrorCode.UNKNOWN_MEMBER_ID
        self.send(ApiKey.SHARE_GROUP_HEARTBEAT, 1, m.ShareGroupHeartbeatRequest(
            group_id="", member_id="x", member_epoch=0, subscribed_topic_names=("t",)))
        assert self.one().error_code == ErrorCode.INVALID_GROUP_ID


    def test_v2_renew_extends_the_lock(self) -> None:
        self.service.start()
        self.addCleanup(self.service.stop)
        self.join()
        self.fetch(0)  # acquires 0-1 until t=30
        self.clock.advance(20)
        renew = m.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(4,))
        self.send(ApiKey.SHARE_FETCH, 2, m.ShareFetchRequest(
            group_id="g", member_id="m1", share_session_epoch=1, max_records=2,
            is_renew_ack=True, topics=(m.ShareFetchTopic(topic_id=self.topic_id, partitions=(
                m.ShareFetchPartition(partition_index=0, acknowledgement_batches=(renew,)),)),),
        ))
        resp: m.ShareFetchResponse = self.one()
        (part,) = resp.responses[0].partitions
        assert part.acknowledge_error_code == 0 and part.acquired_records == ()
        for _ in range(15):  # t=35: past the first deadline, before the renewed one
            self.clock.advance(1)
        summary = self.service.describe("g")[("t", 0)]
        assert summary.acquired == 2
        for _ in range(20):  # t=55: the renewed lock has expired
            self.clock.advance(1)
        assert self.service.describe("g")[("t", 0)].available == 2

    def test_max_bytes_zero_takes_nothing(self) -> None:
        self.join()
        self.send(ApiKey.SHARE_FETCH, 1, m.ShareFetchRequest(
            group_id="g", member_id="m1", share_session_epoch=0, max_records=2, max_bytes=0,
            max_wait_ms=300,
            topics=(m.ShareFetchTopic(topic_id=self.topic_id, partitions=(
                m.ShareFetchPartition(partition_index=0),)),),
        ))
        assert self.tr.value() == b""  # it waits out MaxWaitMs ...
        for _ in range(4):
            self.clock.advance(0.1)
        resp: m.ShareFetchResponse = self.one()
        assert all(not p.acquired_records and not p.records
                   for t in resp.responses for p in t.partitions)  # ... and takes nothing
        assert all(s.acquired == 0 for s in self.service.describe("g").values())
        assert self.fetch(1).responses[0].partitions[0].acquired_records

    def test_closing_acknowledgements_count_when_the_leave_crosses_them(self) -> None:
        """librdkafka closes with a leave heartbeat and a ShareAcknowledge of epoch -1 at
        once; the leave landing while the acknowledgements are written releases nothing
        they acknowledge."""
        self.core.add_topic("u")
        u_id = self.core.topics()["u"].topic_id
        self.join()
        self.send(ApiKey.SHARE_GROUP_HEARTBEAT, 1, m.ShareGroupHeartbeatRequest(
            group_id="g", member_id="m1", member_epoch=1, subscribed_topic_names=("t", "u")))
        self.one()
        self.send(ApiKey.SHARE_FETCH, 1, m.ShareFetchRequest(
            group_id="g", member_id="m1", share_session_epoch=0, max_records=10, topics=(
                m.ShareFetchTopic(topic_id=tid, partitions=(
                    m.ShareFetchPartition(partition_index=0),))
                for tid in (self.topic_id, u_id)
            ),
        ))
        got: m.ShareFetchResponse = self.one()
        assert [
            [(a.first_offset, a.last_offset) for a in p.acquired_records]
            for t in got.responses for p in t.partitions
        ] == [[(0, 4)], [(0, 4)]]
        held = self.log.held_writes = []
        accept = (m.AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=(1,)),)
        self.send(ApiKey.SHARE_ACKNOWLEDGE, 1, m.ShareAcknowledgeRequest(
            group_id="g", member_id="m1", share_session_epoch=-1, topics=tuple(
                m.ShareFetchTopic(topic_id=tid, partitions=(m.ShareFetchPartition(
                    partition_index=0, acknowledgement_batches=accept),))
                for tid in (self.topic_id, u_id)
            )))
        assert len(held) == 1  # the first partition's acknowledgement is being written
        # The leave comes on the client's coordinator connection, a second one.
        coordinator_conn, _ = self.connect()
        coordinator_conn.dataReceived(self.frame(
            ApiKey.SHARE_GROUP_HEARTBEAT, 1,
            m.ShareGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=-1),
        ))
        assert not self.coordinator.is_member("g", "m1")  # the leave is handled ...
        self.log.held_writes = None
        while held:  # ... while the acknowledgements are written
            d, write = held.pop(0)
            d.callback(write())
        acked: m.ShareAcknowledgeResponse = self.one()
        assert [p.error_code for t in acked.responses for p in t.partitions] == [0, 0]
        for topic in ("t", "u"):
            summary = self.service.describe("g")[(topic, 0)]
            assert (summary.start_offset, summary.acquired) == (5, 0)
