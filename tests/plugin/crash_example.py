"""A project's crash test with the ``brokerd`` fixture and confluent-kafka (not collected
here: tests/plugin/test_pytest_plugin.py runs it in a child pytest, and ``make
check-plugin`` in a fresh virtualenv holding only the wheel, pytest and confluent-kafka;
docs/testing-with-brokerd.md shows it)."""

from confluent_kafka import Consumer, Producer


def produce(bootstrap, topic, values):
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0


def consume(bootstrap, group, topic, count):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        # A member the broker still remembers after a crash holds up the next join
        # until its session times out: keep that short.
        "session.timeout.ms": 6000,
    })
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < count:
            message = consumer.poll(30)
            assert message is not None, f"only {values} in 30 s"
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def test_survives_a_crash(brokerd):
    before = [b"a", b"b", b"c"]
    produce(brokerd.bootstrap_servers, "orders", before)
    assert consume(brokerd.bootstrap_servers, "billing", "orders", 3) == before
    address = brokerd.bootstrap_servers

    brokerd.kill()
    brokerd.restart()

    assert brokerd.bootstrap_servers == address
    produce(brokerd.bootstrap_servers, "orders", [b"d"])
    # The group's committed offset survived the crash: it resumes after c.
    assert consume(brokerd.bootstrap_servers, "billing", "orders", 1) == [b"d"]
    assert consume(brokerd.bootstrap_servers, "audit", "orders", 4) == [*before, b"d"]
    # The topic's log lives in the fixture's data directory (under the test's tmp_path).
    assert any(path.name.startswith("orders") for path in brokerd.data_dir.iterdir())
