"""TLS, SASL and ACLs together, as a non-loopback deployment runs them: a real ``twistd
broker`` with an ``ssl:`` Kafka listener, ``--sasl PLAIN,SCRAM-SHA-256``, ``--authorizer
acl`` and one super user, and real clients.

The super user ``admin`` (SCRAM over TLS) grants ``alice`` write and read on the topics
named ``alice-*`` and on her consumer group; ``alice`` (PLAIN over TLS, which a
plaintext listener never offers) then produces and consumes there, is refused a topic
outside her prefix with TOPIC_AUTHORIZATION_FAILED, and does not see it in Metadata; kcat
logs in with SCRAM over TLS under the same ACLs; a client that does not authenticate is
closed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.server.handlers.test_sasl_clients import write_credentials
from tests.kafka_helpers import WAIT, kcat_run
from tests.tls_helpers import Pki, TlsBroker, make_pki

pytestmark = [pytest.mark.clients, pytest.mark.broker]

ALICE, ALICE_PASSWORD = "alice", "alice-secret"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsBroker]:
    tmp: Path = tmp_path_factory.mktemp("secure")
    creds = write_credentials(tmp / "credentials.json")
    proc = TlsBroker(
        tmp / "data",
        pki,
        args=(
            "--sasl", "PLAIN,SCRAM-SHA-256",
            "--credentials", creds,
            "--authorizer", "acl",
            "--super-users", f"User:{ADMIN}",
            "--allow-anonymous", "native",
        ),
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()


def conf(broker: TlsBroker, user: str, password: str, mechanism: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.kafka_bootstrap,
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(broker.pki.ca),
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def admin_conf(broker: TlsBroker) -> dict[str, Any]:
    return conf(broker, ADMIN, ADMIN_PASSWORD, "SCRAM-SHA-256")


def alice_conf(broker: TlsBroker) -> dict[str, Any]:
    return conf(broker, ALICE, ALICE_PASSWORD, "PLAIN")


def grant_alice(broker: TlsBroker) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(admin_conf(broker))
    for fut in admin.create_topics(
        [NewTopic("alice-orders", 1, 1), NewTopic("payroll", 1, 1)], operation_timeout=WAIT
    ).values():
        fut.result(WAIT)

    def allow(rtype: Any, name: str, pattern: Any, op: Any) -> Any:
        return AclBinding(rtype, name, pattern, f"User:{ALICE}", "*", op,
                          AclPermissionType.ALLOW)

    bindings = [
        allow(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, AclOperation.WRITE),
        allow(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, AclOperation.READ),
        allow(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, AclOperation.CREATE),
        allow(ResourceType.GROUP, "alice-g", ResourcePatternType.LITERAL, AclOperation.READ),
    ]
    for fut in admin.create_acls(bindings, request_timeout=WAIT).values():
        assert fut.result(WAIT) is None


@pytest.fixture(scope="module")
def granted(broker: TlsBroker) -> TlsBroker:
    grant_alice(broker)
    return broker


def test_alice_reaches_what_the_acls_allow_over_tls_and_sasl(granted: TlsBroker) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    broker = granted
    producer = Producer(alice_conf(broker))
    for i in range(5):
        producer.produce("alice-orders", b"order-%d" % i)
    assert producer.flush(WAIT) == 0

    denied: list[Any] = []
    producer.produce("payroll", b"raise", on_delivery=lambda err, _msg: denied.append(err))
    producer.flush(WAIT)
    assert denied and denied[0] is not None
    assert denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Metadata of every topic leaves out the one she may not describe.
    topics = AdminClient(alice_conf(broker)).list_topics(timeout=WAIT).topics
    assert "alice-orders" in topics and "payroll" not in topics

    consumer = Consumer({**alice_conf(broker), "group.id": "alice-g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["alice-orders"])
    got: list[bytes] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == [b"order-%d" % i for i in range(5)]

    # A group she has no ACL for is refused.
    other = Consumer({**alice_conf(broker), "group.id": "bob-g",
                      "auto.offset.reset": "earliest"})
    other.subscribe(["alice-orders"])
    try:
        deadline = time.monotonic() + WAIT
        error = None
        while error is None and time.monotonic() < deadline:
            try:
                msg = other.poll(0.5)
            except KafkaException as e:
                error = e.args[0]
                break
            if msg is not None and msg.error() is not None:
                error = msg.error()
        assert error is not None
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        other.close()


def test_kcat_scram_over_tls_under_the_same_acls(granted: TlsBroker) -> None:
    broker = granted
    security = [
        "-X", "security.protocol=sasl_ssl", "-X", f"ssl.ca.location={broker.pki.ca}",
        "-X", "sasl.mechanisms=SCRAM-SHA-256",
        "-X", f"sasl.username={ALICE}", "-X", f"sasl.password={ALICE_PASSWORD}",
    ]
    kcat_run(broker, *security, "-P", "-t", "alice-kcat", stdin=b"hello\n")
    done = kcat_run(broker, *security, "-C", "-t", "alice-kcat", "-o", "beginning", "-e",
                    "-q")
    assert done.stdout.split() == [b"hello"]


def test_a_client_that_does_not_authenticate_gets_nothing(broker: TlsBroker) -> None:
    from confluent_kafka.admin import AdminClient

    plain_tls = {
        "bootstrap.servers": broker.kafka_bootstrap,
        "security.protocol": "ssl",
        "ssl.ca.location": str(broker.pki.ca),
        "socket.timeout.ms": 3000,
    }
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's KafkaException
        AdminClient(plain_tls).list_topics(timeout=3)
