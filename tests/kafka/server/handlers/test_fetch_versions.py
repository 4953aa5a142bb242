"""Fetch at versions 12-18: the flexible encodings (compact records length, tagged
fields skipped), topics by topic ID (13+), and fetch sessions (KIP-227). Frames are
built by hand from Kafka's message schemas; handler tests run the real listener on a
StringTransport with the fake core of tests/kafka/listener/test_protocol.py. Synchronous.
"""

from __future__ import annotations

import struct
import uuid

import attrs
import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handlers.fetch import SCAN_INTERVAL_MS
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.net.frames import SplicedFrame
from brokerd.security.acl import Operation as OP
from brokerd.security.acl import ResourceType
from brokerd.storage.types import StoredRecords

from tests.kafka.listener.test_protocol import KafkaTestCase, batch
from tests.kafka.server.handlers.test_acl import AclTestCase
from tests.kafka.wire.test_codec import NO_TAGS, carr, cb, cs, i8, i16, i32, i64, s, uv

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
ZERO = uuid.UUID(int=0)


def _flex_fetch(version: int, body: bytes) -> bytes:
    """A Fetch request payload with header v2 (client id stays an int16 string)."""
    return i16(ApiKey.FETCH) + i16(version) + i32(7) + s("cli") + NO_TAGS + body


def _tags(*fields: tuple[int, bytes]) -> bytes:
    return uv(len(fields)) + b"".join(uv(tag) + uv(len(data)) + data for tag, data in fields)


# -- the codec -----------------------------------------------------------------------


def test_fetch_request_v12_is_compact_and_skips_the_cluster_id_tag() -> None:
    partition = i32(2) + i32(5) + i64(10) + i32(4) + i64(-1) + i32(99) + NO_TAGS
    body = (i32(-1) + i32(500) + i32(1) + i32(1000) + i8(1) + i32(0) + i32(0)
            + carr(cs("t") + carr(partition) + NO_TAGS)
            + carr(cs("old") + carr(i32(1)) + NO_TAGS) + cs("rack")
            + _tags((0, cs("cluster-1"))))
    req = apis.decode_request(_flex_fetch(12, body)).body
    p = req.topics[0].partitions[0]
    assert (req.topics[0].topic, p.partition, p.current_leader_epoch, p.fetch_offset,
            p.last_fetched_epoch, p.partition_max_bytes) == ("t", 2, 5, 10, 4, 99)
    assert (req.isolation_level, req.session_id, req.session_epoch) == (1, 0, 0)
    assert req.forgotten_topics_data == (apis.ForgottenTopic(topic="old", partitions=(1,)),)
    assert req.rack_id == "rack"


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17, 18])
def test_fetch_request_by_topic_id_with_every_tagged_field(version: int) -> None:
    # 15+: no ReplicaId; the replica state (tag 1) is tagged. 17+: the partition's
    # ReplicaDirectoryId (tag 0), 18+: its HighWatermark (tag 1). All skipped.
    replica = i32(-1) if version <= 14 else b""
    partition_tags = NO_TAGS
    if version >= 17:
        fields = [(0, uuid.uuid4().bytes)] + ([(1, i64(77))] if version >= 18 else [])
        partition_tags = _tags(*fields)
    partition = i32(0) + i32(-1) + i64(3) + i32(-1) + i64(-1) + i32(1 << 20) + partition_tags
    top_tags = _tags((0, cs("c")), (1, i32(-1) + i64(-1) + NO_TAGS)) if version >= 15 else NO_TAGS
    body = (replica + i32(100) + i32(1) + i32(1 << 20) + i8(0) + i32(0) + i32(-1)
            + carr(TOPIC_ID.bytes + carr(partition) + NO_TAGS)
            + carr(TOPIC_ID.bytes + carr(i32(4), i32(5)) + NO_TAGS) + cs("") + top_tags)
    req = apis.decode_request(_flex_fetch(version, body)).body
    assert req.topics == (apis.FetchTopic(topic_id=TOPIC_ID, partitions=(
        apis.FetchPartition(partition=0, fetch_offset=3, partition_max_bytes=1 << 20),)),)
    assert req.forgotten_topics_data == (
        apis.ForgottenTopic(topic_id=TOPIC_ID, partitions=(4, 5)),)
    # The client side encodes the same bytes (tagged fields written empty).
    header = RequestHeader(int(ApiKey.FETCH), version, 7, "cli")
    again = apis.decode_request(apis.encode_request(header, req)[4:]).body
    assert again == req


def _response(records: bytes | StoredRecords | None, *, topic_id: uuid.UUID = TOPIC_ID
              ) -> apis.FetchResponse:
    return apis.FetchResponse(responses=(apis.FetchTopicResponse(
        topic="t", topic_id=topic_id, partitions=(apis.FetchPartitionResponse(
            partition_index=0, high_watermark=5, last_stable_offset=5, log_start_offset=1,
            aborted_transactions=(apis.AbortedTransaction(producer_id=9, first_offset=2),),
            records=records,
        ),)),))


def _partition_v12(records: bytes) -> bytes:
    return (i32(0) + i16(0) + i64(5) + i64(5) + i64(1)
            + carr(i64(9) + i64(2) + NO_TAGS) + i32(-1) + records + NO_TAGS)


def test_fetch_response_v12_and_v13_bytes() -> None:
    # Response header v1 (a tagged-fields byte after the correlation id), compact
    # records: varint length + 1 (2 bytes for 200 bytes of records), none modelled tags.
    records = batch(200)
    head = i32(0) + i16(0) + i32(0)
    out = apis.encode_response(7, 12, _response(records))
    assert out == (i32(len(out) - 4) + i32(7) + NO_TAGS + head
                   + carr(cs("t") + carr(_partition_v12(cb(records))) + NO_TAGS) + NO_TAGS)
    out = apis.encode_response(7, 13, _response(None))
    assert out[9:] == (head + carr(TOPIC_ID.bytes + carr(_partition_v12(b"\x00")) + NO_TAGS)
                       + NO_TAGS)
    for version in range(12, 19):
        body = _response(records)
        payload = apis.encode_response(7, version, body)
        assert isinstance(payload, bytes)
        _, back = apis.decode_response(ApiKey.FETCH, version, payload[4:])
        name = "t" if version == 12 else ""
        topic_id = TOPIC_ID if version >= 13 else uuid.UUID(int=0)
        assert back == attrs.evolve(body, responses=(attrs.evolve(
            body.responses[0], topic=name, topic_id=topic_id),))


class _Region:
    """A file region that holds bytes in memory (shaped like StoredSpan)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0
        self.length = len(data)
        self.released = False

    def fileno(self) -> int:
        raise AssertionError("not sent here")

    def read(self) -> bytes:
        return self.data[: self.length]

    def read_at(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]

    def truncate(self, length: int) -> None:
        self.length = length

    def release(self) -> None:
        self.released = True


@pytest.mark.parametrize("size", [61, 200, 20_000, 1 << 20])
@pytest.mark.parametrize("version", [11, 12, 18])
def test_spliced_records_get_the_same_length_prefix_as_bytes(version: int, size: int) -> None:
    # The varint before spliced records is 1, 2, 3 bytes long for these sizes; the
    # frame's size prefix counts it, and the parts joined are the by-value encoding.
    records = batch(size)
    by_value = apis.encode_response(7, version, _response(records))
    for payload in (records, _Region(records)):
        frame = apis.encode_response(7, version, _response(StoredRecords(payload)))
        assert isinstance(frame, SplicedFrame)
        joined = b"".join(p if isinstance(p, bytes) else p.read() for p in frame.parts)
        assert joined == by_value
        assert frame.size == len(by_value)
        assert struct.unpack_from(">i", joined)[0] == frame.size - 4


def test_a_region_cut_to_the_fetch_cap_is_prefixed_with_its_cut_length() -> None:
    region = _Region(batch(5000))
    region.truncate(1234)
    frame = apis.encode_response(7, 12, _response(StoredRecords(region)))
    assert isinstance(frame, SplicedFrame)
    joined = b"".join(p if isinstance(p, bytes) else p.read() for p in frame.parts)
    assert joined == apis.encode_response(7, 12, _response(batch(5000)[:1234]))


# -- the handler ---------------------------------------------------------------------


def _fetch(parts: list[tuple[uuid.UUID, int, int]], **fields: object) -> apis.FetchRequest:
    topics: dict[uuid.UUID, list[apis.FetchPartition]] = {}
    for topic_id, partition, offset in parts:
        topics.setdefault(topic_id, []).append(apis.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=1000))
    return attrs.evolve(apis.FetchRequest(max_wait_ms=0, min_bytes=1, topics=tuple(
        apis.FetchTopic(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()
    )), **fields)


class FetchByTopicIdTests(KafkaTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t", 2)
        self.core.logs[("t", 0)] = [batch(100), batch(120)]
        self.t_id = self.core.topics()["t"].topic_id

    def test_v12_still_names_topics(self) -> None:
        self.send(ApiKey.FETCH, 12, self.fetch_request([("t", 0, 1, 1000)]))
        [topic] = self.one().responses
        self.assertEqual((topic.topic, topic.partitions[0].records), ("t", batch(120)))

    def test_a_known_id_reads_its_topic_and_answers_with_the_id(self) -> None:
        for version in (13, 17, 18):
            self.send(ApiKey.FETCH, version, _fetch([(self.t_id, 0, 0), (self.t_id, 1, 0)]))
            [topic] = self.one().responses
            self.assertEqual(topic.topic_id, self.t_id)
            self.assertEqual([(p.partition_index, p.error_code, p.records)
                              for p in topic.partitions],
                             [(0, 0, batch(100) + batch(120)), (1, 0, b"")])
        self.assertEqual({c[0] for c in self.core.fetch_calls}, {"t"})

    def test_an_unknown_id_is_unknown_topic_id_for_each_partition(self) -> None:
        other = uuid.uuid4()
        self.send(ApiKey.FETCH, 13, _fetch(
            [(other, 0, 0), (other, 3, 0), (uuid.UUID(int=0), 0, 0), (self.t_id, 0, 1)]))
        got = {t.topic_id: [(p.partition_index, p.error_code) for p in t.partitions]
               for t in self.one().responses}
        self.assertEqual(got, {
            other: [(0, ErrorCode.UNKNOWN_TOPIC_ID), (3, ErrorCode.UNKNOWN_TOPIC_ID)],
            uuid.UUID(int=0): [(0, ErrorCode.UNKNOWN_TOPIC_ID)],
            self.t_id: [(0, 0)],
        })
        self.assertEqual([c[:3] for c in self.core.fetch_calls], [("t", 0, 1)])

    def test_a_deleted_topic_id_is_unknown(self) -> None:
        self.core.delete_topic("t")
        self.send(ApiKey.FETCH, 13, _fetch([(self.t_id, 0, 0)]))
        [topic] = self.one().responses
        self.assertEqual(topic.partitions[0].error_code, ErrorCode.UNKNOWN_TOPIC_ID)

    def test_the_long_poll_waits_on_the_known_partitions_only(self) -> None:
        self.send(ApiKey.FETCH, 13, _fetch([(uuid.uuid4(), 0, 0), (self.t_id, 0, 2)],
                                          max_wait_ms=500, min_bytes=10))
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(self.core.waits[0][0], [("t", 0, 2)])
        self.core.logs[("t", 0)].append(batch(100))
        self.core.wait_deferreds[0].callback(None)
        codes = sorted(t.partitions[0].error_code for t in self.one().responses)
        self.assertEqual(codes, [0, ErrorCode.UNKNOWN_TOPIC_ID])


class FetchSessionTests(KafkaTestCase):
    """Fetch sessions (KIP-227) through the real listener and handler: a full fetch opens
    one, incremental fetches read and answer only what changed."""

    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t", 3)
        self.core.logs[("t", 0)] = [batch(100)]
        self.t_id = self.core.topics()["t"].topic_id

    def full(self, version: int, *, epoch: int = 0, session_id: int = 0,
             **fields: object) -> apis.FetchResponse:
        req = self.fetch_request([("t", p, 0, 1000) for p in range(3)])
        if version >= 13:
            req = _fetch([(self.t_id, p, 0) for p in range(3)])
        self.send(ApiKey.FETCH, version, attrs.evolve(
            req, session_id=session_id, session_epoch=epoch, **fields))
        answer: apis.FetchResponse = self.one()
        return answer

    def incremental(
        self, version: int, session_id: int, epoch: int,
        parts: list[tuple[int, int]] = (),  # type: ignore[assignment]
        forget: tuple[int, ...] = (), **fields: object,
    ) -> int:
        topic = apis.FetchTopic(
            topic="t" if version < 13 else "", topic_id=self.t_id if version >= 13 else ZERO,
            partitions=tuple(apis.FetchPartition(partition=p, fetch_offset=o,
                                                 partition_max_bytes=1000) for p, o in parts))
        forgotten = apis.ForgottenTopic(
            topic="t" if version < 13 else "", topic_id=self.t_id if version >= 13 else ZERO,
            partitions=forget)
        req = apis.FetchRequest(
            max_wait_ms=0, min_bytes=1, session_id=session_id, session_epoch=epoch,
            topics=(topic,) if parts else (), forgotten_topics_data=(forgotten,) if forget else ())
        return self.send(ApiKey.FETCH, version, attrs.evolve(req, **fields))

    def named(self, answer: apis.FetchResponse) -> dict[int, apis.FetchPartitionResponse]:
        return {p.partition_index: p for t in answer.responses for p in t.partitions}

    def test_a_full_fetch_opens_a_session_and_incremental_ones_answer_what_changed(self) -> None:
        for version in (7, 12, 13, 18):
            first = self.full(version)
            self.assertEqual(first.error_code, 0)
            self.assertNotEqual(first.session_id, 0)
            self.assertEqual(sorted(self.named(first)), [0, 1, 2])
            sid = first.session_id
            self.core.fetch_calls.clear()
            # The client moves to offset 1 on t-0; nothing else changed. The answer
            # names nothing (t-0 is at its end), and only t-0 was read.
            self.incremental(version, sid, 1, [(0, 1)])
            answer = self.one()
            self.assertEqual((answer.error_code, answer.session_id, answer.responses),
                             (0, sid, ()))
            self.assertEqual([c[:3] for c in self.core.fetch_calls], [("t", 0, 1)])
            # Nothing named, nothing new: no partition is even read.
            self.core.fetch_calls.clear()
            self.incremental(version, sid, 2)
            self.assertEqual(self.one().responses, ())
            self.assertEqual(self.core.fetch_calls, [])
            # Records on t-2: only t-2 is read and answered.
            self.core.append(("t", 2), batch(90))
            self.incremental(version, sid, 3)
            answer = self.one()
            self.assertEqual(list(self.named(answer)), [2])
            self.assertEqual(self.named(answer)[2].records, batch(90))
            self.assertEqual(self.named(answer)[2].high_watermark, 1)
            self.assertEqual([c[:3] for c in self.core.fetch_calls], [("t", 2, 0)])
            # The log start moving (records deleted, nothing appended) is news too,
            # seen once a second, when every partition's offsets are looked at.
            self.core.fetch_calls.clear()
            self.incremental(version, sid, 4, [(2, 1)])
            self.assertEqual(self.one().responses, ())
            self.core.log_start[("t", 2)] = 1
            self.incremental(version, sid, 5)
            self.assertEqual(self.one().responses, ())
            self.clock.advance(SCAN_INTERVAL_MS / 1000)
            self.incremental(version, sid, 6)
            self.assertEqual(
                [(p.partition_index, p.log_start_offset, p.records)
                 for p in self.named(self.one()).values()], [(2, 1, b"")])
            # Forgotten partitions are neither read nor answered.
            self.incremental(version, sid, 7, forget=(2,))
            self.one()
            self.core.append(("t", 2), batch(80))
            self.clock.advance(SCAN_INTERVAL_MS / 1000)  # not even in a full look
            self.core.fetch_calls.clear()
            self.incremental(version, sid, 8)
            self.assertEqual(self.one().responses, ())
            self.assertEqual(self.core.fetch_calls, [])
            # Epoch -1 closes the session; its ID is unknown from then on.
            closed = self.full(version, epoch=-1, session_id=sid)
            self.assertEqual(closed.session_id, 0)
            self.incremental(version, sid, 9)
            self.assertEqual(self.one().error_code, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            self.core.logs[("t", 2)] = []
            self.core.log_start[("t", 2)] = 0

    def test_session_errors_read_nothing(self) -> None:
        sid = self.full(12).session_id
        self.core.fetch_calls.clear()
        cases = [
            (12, sid + 1, 1, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (12, sid, 2, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
            # Opened by name (version 12): going on by topic ID is refused.
            (13, sid, 1, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR),
        ]
        for version, session_id, epoch, code in cases:
            self.incremental(version, session_id, epoch, [(0, 0)], max_wait_ms=500)
            answer = self.one()
            self.assertEqual((answer.error_code, answer.session_id, answer.responses),
                             (code, 0, ()))
        self.assertEqual((self.core.fetch_calls, self.core.waits), ([], []))
        # The session is still there at epoch 1.
        self.incremental(12, sid, 1)
        self.assertEqual(self.one().error_code, 0)

    def test_an_incremental_fetch_parks_on_its_session_watch(self) -> None:
        sid = self.full(13).session_id
        self.core.fetch_calls.clear()
        self.incremental(13, sid, 1, [(0, 1)], max_wait_ms=500, min_bytes=150)
        self.assertEqual(self.tr.value(), b"")
        # Parked without a registration per partition (the session's watch stands).
        self.assertEqual(self.core.waits, [])
        self.assertEqual(sorted(self.core.watchers), [("t", 0), ("t", 1), ("t", 2)])
        self.core.append(("t", 1), batch(100))  # short of MinBytes: it reads, parks again
        self.assertEqual(self.tr.value(), b"")
        self.core.append(("t", 2), batch(100))
        answer = self.one()
        self.assertEqual(sorted(self.named(answer)), [1, 2])
        self.assertEqual(self.named(answer)[2].records, batch(100))
        # Only the named and the appended partitions were read.
        self.assertEqual(sorted({c[:2] for c in self.core.fetch_calls}),
                         [("t", 0), ("t", 1), ("t", 2)])
        self.assertNotIn(("t", 2, 0), [c[:3] for c in self.core.fetch_calls[:2]])
        # Nothing appended: it waits MaxWaitMs, then answers nothing new.
        self.incremental(13, sid, 2, [(1, 1), (2, 1)], max_wait_ms=500)
        self.assertEqual(self.tr.value(), b"")
        self.clock.advance(0.5)
        self.assertEqual(self.one().responses, ())
        # The session's end takes its watch away.
        self.full(13, epoch=-1, session_id=sid)
        self.assertEqual({k: v for k, v in self.core.watchers.items() if v}, {})

    def test_records_a_full_fetch_left_behind_come_with_the_next_fetch(self) -> None:
        self.core.logs[("t", 1)] = [batch(100)]
        first = self.full(12, max_bytes=100)  # room for t-0's batch only
        self.assertEqual(self.named(first)[1].records, b"")
        # Nothing appended since, no time passed: t-1 is read all the same.
        self.incremental(12, first.session_id, 1, [(0, 1)])
        got = self.named(self.one())
        self.assertEqual(list(got), [1])
        self.assertEqual(got[1].records, batch(100))

    def test_a_deleted_topic_is_unknown_in_its_session(self) -> None:
        sid = self.full(13).session_id
        del self.core._topics["t"]
        for p in range(3):
            del self.core.logs[("t", p)]
            # As the core's deletion does: the partition's watchers are told.
            for watcher in list(self.core.watchers.get(("t", p), ())):
                watcher.changed(("t", p), None)
        self.incremental(13, sid, 1)
        [topic] = self.one().responses
        self.assertEqual(topic.topic_id, self.t_id)
        self.assertEqual([(p.partition_index, p.error_code) for p in topic.partitions],
                         [(p, ErrorCode.UNKNOWN_TOPIC_ID) for p in range(3)])

    def test_partitions_with_records_are_answered_last_next_time(self) -> None:
        sid = self.full(12).session_id
        for p in (1, 2):
            self.core.append(("t", p), batch(100))
        # Room for one batch: t-1 gets it, t-2 only its offsets.
        self.incremental(12, sid, 1, [(0, 1)], max_bytes=100)
        got = self.named(self.one())
        self.assertEqual((got[1].records, got[2].records), (batch(100), b""))
        # t-1 (answered records, position not moved by the client) goes to the back:
        # now t-2 is read first and gets the room.
        self.incremental(12, sid, 2, max_bytes=100)
        got = self.named(self.one())
        self.assertEqual(got[2].records, batch(100))


class FetchByTopicIdAclTests(AclTestCase):
    def test_read_is_checked_on_the_topic_the_id_names(self) -> None:
        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.grant(ResourceType.TOPIC, "ok", OP.READ)
        ids = {name: info.topic_id for name, info in self.core.topics().items()}
        unknown = uuid.uuid4()
        self.send(ApiKey.FETCH, 13, _fetch([(ids["ok"], 0, 0), (ids["secret"], 0, 0),
                                            (unknown, 0, 0)]))
        codes = {t.topic_id: t.partitions[0].error_code for t in self.one().responses}
        self.assertEqual(codes, {
            ids["ok"]: 0,
            ids["secret"]: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            # Checked before any ACL, as Kafka does: an ID names no topic to protect.
            unknown: ErrorCode.UNKNOWN_TOPIC_ID,
        })
        self.assertEqual([c[0] for c in self.core.fetch_calls], ["ok"])

    def test_an_incremental_fetch_adds_no_topic_it_may_not_read(self) -> None:
        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.grant(ResourceType.TOPIC, "ok", OP.READ)
        self.send(ApiKey.FETCH, 12, attrs.evolve(
            self.fetch_request([("ok", 0, 0, 1000)]), session_epoch=0))
        sid = self.one().session_id
        self.assertNotEqual(sid, 0)
        self.send(ApiKey.FETCH, 12, attrs.evolve(
            self.fetch_request([("secret", 0, 0, 1000)]), session_id=sid, session_epoch=1))
        answer = self.one()
        self.assertEqual(
            [(t.topic, [p.error_code for p in t.partitions]) for t in answer.responses],
            [("secret", [ErrorCode.TOPIC_AUTHORIZATION_FAILED])])
        session = self.factory.handlers.fetch_sessions.get(sid)
        assert session is not None
        self.assertEqual(list(session.partitions), [("ok", 0)])

    def test_an_incremental_fetch_is_refused_whatever_the_acls(self) -> None:
        self.core.add_topic("secret")
        self.send(ApiKey.FETCH, 12, attrs.evolve(
            self.fetch_request([("secret", 0, 0, 1000)]), session_id=3, session_epoch=2))
        answer = self.one()
        self.assertEqual((answer.error_code, answer.responses),
                         (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ()))
