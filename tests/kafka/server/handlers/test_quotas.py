"""Client quotas on a real ``twistd broker``: DescribeClientQuotas/AlterClientQuotas over
a socket, Kafka 4.4's ``kafka-configs --entity-type users|clients``, enforcement seen by
the clients (librdkafka's throttle statistics and its rate, the Java producer's
``produce-throttle-time-max``, the connection muted after a throttled answer, fetches
answered empty while throttled), ``/metrics``, and the quotas surviving kill -9.

One broker for the module, measuring over 3 windows of 1 s (``--quota-window-num 3``,
Kafka's default is 11) so that the first burst a quota allows, and so the tests, stay
short; each test uses its own client ids and topics.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import quotas as q
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.encode import encode_batch

from tests.brokerproc import BrokerProcess
from tests.e2e.test_kafka_tools import tool, tool_ready
from tests.kafka_helpers import RawKafka, crash_and_restart, module_broker

pytestmark = pytest.mark.broker

P = "producer_byte_rate"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "quotas", "--quota-window-num", "3")


def _entity(**names: str | None) -> tuple[q.QuotaEntityPart, ...]:
    return tuple(
        q.QuotaEntityPart(entity_type=t.replace("_", "-"), entity_name=n)
        for t, n in names.items()
    )


def _alter(broker: BrokerProcess, entity: tuple[q.QuotaEntityPart, ...], key: str,
           value: float | None, *, validate_only: bool = False,
           version: int = 1) -> q.AlterClientQuotasResponse:
    op = q.QuotaOp(key=key, remove=True) if value is None else q.QuotaOp(key=key, value=value)
    with RawKafka(broker) as raw:
        answer: q.AlterClientQuotasResponse = raw.call(
            ApiKey.ALTER_CLIENT_QUOTAS, version, q.AlterClientQuotasRequest(
                entries=(q.QuotaAlteration(entity=entity, ops=(op,)),),
                validate_only=validate_only))
    return answer


def _describe(broker: BrokerProcess, *components: q.QuotaFilterComponent,
              strict: bool = False, version: int = 1) -> q.DescribeClientQuotasResponse:
    with RawKafka(broker) as raw:
        answer: q.DescribeClientQuotasResponse = raw.call(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, version,
            q.DescribeClientQuotasRequest(components=components, strict=strict))
    return answer


def _described(answer: q.DescribeClientQuotasResponse) -> dict[tuple[tuple[str, str | None], ...],
                                                                dict[str, float]]:
    assert answer.error_code == 0, answer
    assert answer.entries is not None
    return {
        tuple((p.entity_type, p.entity_name) for p in e.entity): {v.key: v.value for v in e.values}
        for e in answer.entries
    }


@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_describe_over_the_wire(broker: BrokerProcess, version: int) -> None:
    user = f"wire-user-{version}"
    entity = _entity(user=user, client_id=None)
    answer = _alter(broker, entity, P, 4096.0, version=version)
    assert [e.error_code for e in answer.entries] == [0]
    assert answer.entries[0].entity == entity
    # validate_only checks and changes nothing.
    assert _alter(broker, entity, P, 1.0, validate_only=True).entries[0].error_code == 0
    exact = q.QuotaFilterComponent(entity_type="user", match_type=0, match=user)
    found = _described(_describe(broker, exact, version=version))
    assert found == {(("user", user), ("client-id", None)): {P: 4096.0}}
    assert _described(_describe(broker, exact, strict=True)) == {}
    # A bad value fails its entry (Kafka's INVALID_REQUEST), a bad filter the describe.
    bad = _alter(broker, entity, P, 1.5)
    assert bad.entries[0].error_code == ErrorCode.INVALID_REQUEST
    assert "Long" in (bad.entries[0].error_message or "")
    refused = _describe(broker, q.QuotaFilterComponent(entity_type="user", match_type=0))
    assert refused.error_code == ErrorCode.INVALID_REQUEST and refused.entries is None
    assert _alter(broker, entity, P, None).entries[0].error_code == 0
    assert _described(_describe(broker, exact)) == {}


def test_kafka_configs_tool_alters_and_describes_users_and_clients(
    broker: BrokerProcess,
) -> None:
    tool_ready()
    bs = ("--bootstrap-server", broker.kafka_bootstrap)
    user_and_clients = ("--entity-type", "users", "--entity-name", "tool-user",
                        "--entity-type", "clients")
    tool("kafka-configs.sh", *bs, "--alter", *user_and_clients, "--entity-default",
         "--add-config", "producer_byte_rate=1048576,request_percentage=25.5")
    assert _alter(broker, _entity(client_id="tool-client"), "consumer_byte_rate",
                  2048.0).entries[0].error_code == 0
    both = tool("kafka-configs.sh", *bs, "--describe", *user_and_clients)
    assert ("user-principal 'tool-user', the default client-id are "
            "producer_byte_rate=1048576.0, request_percentage=25.5") in both, both
    tool("kafka-configs.sh", *bs, "--alter", "--entity-type", "clients", "--entity-name",
         "tool-client", "--delete-config", "consumer_byte_rate")
    exact = q.QuotaFilterComponent(entity_type="client-id", match_type=0, match="tool-client")
    assert _described(_describe(broker, exact)) == {}


def _produce_request(topic: str, size: int) -> apis.ProduceRequest:
    records = encode_batch([b"x" * size], timestamp_ms=int(time.time() * 1000))
    return apis.ProduceRequest(
        acks=-1, timeout_ms=10_000,
        topic_data=(apis.ProduceTopicData(
            name=topic, partition_data=(apis.ProducePartitionData(index=0, records=records),)),),
    )


def test_a_throttled_answer_carries_the_time_and_the_connection_is_muted(
    broker: BrokerProcess,
) -> None:
    # RawKafka's client id; 10 kB/s: a first burst of 20 kB (2 windows) passes.
    entity = _entity(client_id="brokerd-tests")
    assert _alter(broker, entity, P, 10_000.0).entries[0].error_code == 0
    try:
        with RawKafka(broker) as raw:
            first = raw.call(ApiKey.PRODUCE, 9, _produce_request("quota-mute", 15_000))
            assert first.throttle_time_ms == 0
            second = raw.call(ApiKey.PRODUCE, 9, _produce_request("quota-mute", 15_000))
            # 30 kB (and the request headers) over the 2 s assumed: 15 kB/s, half over
            # the bound: 1 s (less the time between the two, which the span grows by).
            assert 800 <= second.throttle_time_ms <= 1100, second
            sent = time.monotonic()
            raw.call(ApiKey.API_VERSIONS, 3, apis.ApiVersionsRequest(
                client_software_name="t", client_software_version="1"))
            waited = time.monotonic() - sent
        assert waited >= second.throttle_time_ms / 1000 - 0.1, waited
        assert broker.metric("brokerd_client_quota_throttled_requests_total",
                             quota=P, user="", client_id="brokerd-tests") >= 1
    finally:
        _alter(broker, entity, P, None)


def test_librdkafka_producer_is_held_to_its_quota(broker: BrokerProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    quota = 200_000.0
    assert _alter(broker, _entity(client_id="rd-quota"), P, quota).entries[0].error_code == 0
    stats: list[dict[str, object]] = []
    delivered: list[tuple[float, int]] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.kafka_bootstrap, "client.id": "rd-quota",
        "statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s)),
        "linger.ms": 5, "batch.size": 20_000, "queue.buffering.max.messages": 50,
    })

    def done(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((time.monotonic(), 2000))

    start = time.monotonic()
    value = b"v" * 2000
    while time.monotonic() - start < 4.0:
        try:
            producer.produce("quota-rd", value, on_delivery=done)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    producer.poll(0.5)
    # Everything, the first burst (2 windows of the quota) included, at about the quota:
    # unthrottled, this producer sends tens of MB/s here.
    elapsed = delivered[-1][0] - start
    rate = sum(n for _, n in delivered) / elapsed
    assert 0.6 * quota <= rate <= 1.6 * quota, (rate, elapsed)
    throttle = max(
        int(b["throttle"]["max"])  # type: ignore[index]
        for s in stats for b in s["brokers"].values()  # type: ignore[attr-defined]
    )
    assert throttle > 0


def test_java_producer_sees_the_throttle(broker: BrokerProcess) -> None:
    tool_ready()
    assert _alter(broker, _entity(client_id="java-quota"), P, 50_000.0).entries[0].error_code == 0
    out = tool(
        "kafka-producer-perf-test.sh", "--topic", "quota-java", "--num-records", "700",
        "--record-size", "1000", "--throughput", "-1", "--print-metrics",
        "--producer-props", f"bootstrap.servers={broker.kafka_bootstrap}",
        "client.id=java-quota", "batch.size=16384", "linger.ms=5",
    )
    match = re.search(r"producer-metrics:produce-throttle-time-max:\{client-id=java-quota\}\s*:\s*"
                      r"([0-9.]+)", out)
    assert match, out
    assert float(match.group(1)) > 0, out


def test_a_fetch_over_the_consumer_quota_is_answered_empty(broker: BrokerProcess) -> None:
    with RawKafka(broker) as raw:
        for _ in range(3):
            raw.call(ApiKey.PRODUCE, 9, _produce_request("quota-fetch", 8_000))
    entity = _entity(client_id="brokerd-tests")
    # 10 kB/s: a fetch may hold 20 kB (2 windows), not the 24 kB there are.
    assert _alter(broker, entity, "consumer_byte_rate", 10_000.0).entries[0].error_code == 0

    def fetch(offset: int) -> apis.FetchRequest:
        return apis.FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=10_000_000,
            topics=(apis.FetchTopic(topic="quota-fetch", partitions=(
                apis.FetchPartition(partition=0, fetch_offset=offset,
                                    partition_max_bytes=10_000_000),)),),
        )

    try:
        with RawKafka(broker) as raw:
            # A small answer starts the share's windows; a second later the span the
            # rate is measured over is past the two windows assumed at first.
            assert raw.call(ApiKey.FETCH, 12, fetch(3)).throttle_time_ms == 0
            time.sleep(1.1)
            first = raw.call(ApiKey.FETCH, 12, fetch(0))
            assert first.throttle_time_ms == 0
            held = first.responses[0].partitions[0].records
            # Cut to what the quota allows in its window (a partial batch ends it).
            assert held is not None and len(held) == 20_000
            second = raw.call(ApiKey.FETCH, 12, fetch(0))
            assert second.throttle_time_ms > 0
            assert second.responses == ()
    finally:
        _alter(broker, entity, "consumer_byte_rate", None)


@pytest.mark.slow
def test_quotas_survive_kill_9(broker: BrokerProcess) -> None:
    entity = _entity(user=None, client_id="durable")
    assert _alter(broker, entity, "controller_mutation_rate", 3.0).entries[0].error_code == 0
    crash_and_restart(broker)
    exact = q.QuotaFilterComponent(entity_type="client-id", match_type=0, match="durable")
    found = _described(_describe(broker, exact))
    assert found == {(("user", None), ("client-id", "durable")): {
        "controller_mutation_rate": 3.0}}


def test_controller_mutations_beyond_the_quota_are_refused_when_strict(
    broker: BrokerProcess,
) -> None:
    entity = _entity(client_id="brokerd-tests")
    # 1 partition mutation a second: a burst of 3 (3 windows of 1 s).
    assert _alter(broker, entity, "controller_mutation_rate", 1.0).entries[0].error_code == 0

    def topic(name: str, partitions: int) -> apis.CreatableTopic:
        return apis.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)

    try:
        with RawKafka(broker) as raw:
            answer = raw.call(ApiKey.CREATE_TOPICS, 7, apis.CreateTopicsRequest(topics=(
                topic("quota-mut-a", 3), topic("quota-mut-b", 2), topic("quota-mut-c", 1))))
        codes = {t.name: t.error_code for t in answer.topics}
        # The burst covers a; b runs the bucket to -2 (allowed: it was not below 0);
        # c is refused, and the answer says how long until the bucket is back at 0.
        assert codes == {"quota-mut-a": 0, "quota-mut-b": 0,
                         "quota-mut-c": ErrorCode.THROTTLING_QUOTA_EXCEEDED}
        assert 1900 <= answer.throttle_time_ms <= 2000, answer.throttle_time_ms
    finally:
        _alter(broker, entity, "controller_mutation_rate", None)
