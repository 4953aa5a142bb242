"""Real Kafka clients authenticating with SASL/SCRAM against a real ``twistd broker``
started with ``--sasl SCRAM-SHA-256,SCRAM-SHA-512,PLAIN`` on a plaintext listener.

confluent-kafka (librdkafka), kafka-python (SaslHandshake v1 and, with an old
``api_version``, v0 with raw tokens), aiokafka, kcat and kafkajs log in, produce and
consume; a wrong password surfaces as an authentication error in each; PLAIN is refused
on plaintext; AlterUserScramCredentials through confluent-kafka's AdminClient changes a
password that works at once, without a restart.

Wrong-password tests run against a broker of their own: each failure slows the next
answers to the same user from 127.0.0.1 (librdkafka retries in a loop), which the
correct logins of the shared broker need not wait for.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.security.credentials import CredentialChange, CredentialStore
from brokerd.security.scram import SCRAM_SHA_256, SCRAM_SHA_512

from tests.brokerproc import REPO, BrokerProcess
from tests.kafka_helpers import WAIT, kcat_args, module_broker, need_kcat

pytestmark = [pytest.mark.clients, pytest.mark.broker]

MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
USER, PASSWORD = "alice", "alice-secret"
NODE_DIR = REPO / "tests" / "node"


def write_credentials(path: Path) -> str:
    store = CredentialStore.open(str(path), create=True)
    store.alter([
        CredentialChange(name, mech.name, mech.credential(password))
        for name, password in ((USER, PASSWORD), ("admin", "admin-secret"))
        for mech in (SCRAM_SHA_256, SCRAM_SHA_512)
    ])
    return str(path)


def sasl_broker(tmp: pytest.TempPathFactory, name: str) -> Iterator[BrokerProcess]:
    creds = write_credentials(tmp.mktemp(f"{name}-creds") / "credentials.json")
    # The harness waits on the native port: it stays open, as an allowed anonymous door.
    yield from module_broker(
        tmp, name, "--sasl", MECHANISMS, "--credentials", creds, "--allow-anonymous", "native"
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from sasl_broker(tmp_path_factory, "sasl")


@pytest.fixture(scope="module")
def refusing_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from sasl_broker(tmp_path_factory, "sasl-bad")


def ck_conf(broker: BrokerProcess, mechanism: str = "SCRAM-SHA-256", user: str = USER,
            password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.kafka_bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def ck_round_trip(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    producer = Producer(conf)
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(WAIT) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def ck_auth_error(conf: dict[str, Any]) -> str:
    """Run a producer until librdkafka reports an authentication error; return it."""
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        producer.poll(0.2)
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if auth:
            return str(auth[0].str())
    raise AssertionError(f"no authentication error, got {errors}")


# -- confluent-kafka -------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_scram(broker: BrokerProcess, mechanism: str) -> None:
    values = [f"{mechanism}-{i}".encode() for i in range(5)]
    assert ck_round_trip(ck_conf(broker, mechanism), f"ck-{mechanism}", values) == values
    assert f"authenticated as User:{USER} ({mechanism})" in broker.log()


def test_confluent_wrong_password(refusing_broker: BrokerProcess) -> None:
    error = ck_auth_error(ck_conf(refusing_broker, password="wrong"))
    assert "Authentication failed" in error or "too many failed" in error
    assert "SASL authentication from /127.0.0.1 failed" in refusing_broker.log()


def test_confluent_plain_refused_on_plaintext(refusing_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**ck_conf(refusing_broker, "PLAIN"), "error_cb": errors.append})
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    assert errors, "PLAIN on plaintext was not refused"
    assert errors[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                KafkaError._ALL_BROKERS_DOWN), errors
    assert "PLAIN" in str(errors[0]) or "mechanism" in str(errors[0]).lower() or (
        "SASL mechanism 'PLAIN' refused" in refusing_broker.log())


def test_alter_user_scram_credentials_then_login(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(ck_conf(broker, user="admin", password="admin-secret"))
    upsert = UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-pass")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(WAIT)
    described = admin.describe_user_scram_credentials(["bob"])
    info = described["bob"].result(WAIT)
    assert [(c.mechanism, c.iterations) for c in info.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)]
    # No restart: bob logs in with the password the admin set.
    conf = ck_conf(broker, "SCRAM-SHA-256", "bob", "bob-pass")
    assert ck_round_trip(conf, "ck-bob", [b"from bob"]) == [b"from bob"]
    # Deleting a credential that does not exist is refused per user.
    delete = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)
    with pytest.raises(Exception, match=r"(?i)not exist|RESOURCE_NOT_FOUND"):
        admin.alter_user_scram_credentials([delete])["nobody"].result(WAIT)


def test_brokerctl_change_seen_without_restart(broker: BrokerProcess,
                                               tmp_path: Path) -> None:
    creds = next(broker.data_dir.parent.parent.glob("sasl-creds*/credentials.json"))
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "brokerctl"), "users", "add", "carol",
         "--credentials", str(creds), "--mechanism", "SCRAM-SHA-512"],
        input=b"carol-pass\n", capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    time.sleep(1.2)  # the broker stats the file at most once a second
    conf = ck_conf(broker, "SCRAM-SHA-512", "carol", "carol-pass")
    assert ck_round_trip(conf, "ck-carol", [b"c"]) == [b"c"]


# -- kafka-python ------------------------------------------------------------------------


def kp_conf(broker: BrokerProcess, mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.kafka_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": password,
    }


# With the versions of Kafka 0.11 kafka-python uses SaslHandshake v0 and raw tokens.
@pytest.mark.parametrize("extra", [{}, {"api_version": (0, 11, 0)}],
                         ids=["handshake-v1", "handshake-v0-raw-tokens"])
def test_kafka_python_scram(broker: BrokerProcess, extra: dict[str, Any]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-{len(extra)}"
    conf = {**kp_conf(broker, "SCRAM-SHA-512"), **extra}
    producer = KafkaProducer(**conf)
    producer.send(topic, b"kp-value").get(WAIT)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest",
                             consumer_timeout_ms=int(WAIT * 1000), **conf)
    try:
        got = next(iter(consumer)).value
    finally:
        consumer.close()
    assert got == b"kp-value"


def test_kafka_python_wrong_password(refusing_broker: BrokerProcess,
                                    caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    # kafka-python retries until its bootstrap timeout, then raises a timeout; the
    # authentication error is what it logs for each attempt.
    with pytest.raises(KafkaError):
        KafkaProducer(**kp_conf(refusing_broker, "SCRAM-SHA-256", "wrong"),
                      bootstrap_timeout_ms=3000)
    assert "SaslAuthenticationFailedError" in caplog.text


# -- aiokafka ----------------------------------------------------------------------------


def ak_conf(broker: BrokerProcess, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.kafka_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": USER,
        "sasl_plain_password": password,
    }


def test_aiokafka_scram(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> bytes:
        producer = AIOKafkaProducer(**ak_conf(broker))
        await producer.start()
        try:
            await producer.send_and_wait("ak-topic", b"ak-value")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("ak-topic", auto_offset_reset="earliest",
                                    **ak_conf(broker))
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), WAIT)
        finally:
            await consumer.stop()
        return bytes(msg.value or b"")

    assert asyncio.run(run()) == b"ak-value"


def test_aiokafka_wrong_password(refusing_broker: BrokerProcess,
                                 caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> None:
        producer = AIOKafkaProducer(**ak_conf(refusing_broker, "wrong"))
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(KafkaError):
        asyncio.run(run())
    # aiokafka raises "Unable to bootstrap" and logs why.
    assert "SaslAuthenticationFailed" in caplog.text or "too many failed" in caplog.text


# -- kcat --------------------------------------------------------------------------------


def kcat_sasl(broker: BrokerProcess, password: str = PASSWORD) -> list[str]:
    return [
        "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=SCRAM-SHA-256",
        "-X", f"sasl.username={USER}", "-X", f"sasl.password={password}",
    ]


def test_kcat_scram(broker: BrokerProcess) -> None:
    need_kcat()
    done = subprocess.run(kcat_args(broker, *kcat_sasl(broker), "-P", "-t", "kc-topic"),
                          input=b"one\ntwo\n", capture_output=True, timeout=WAIT, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        kcat_args(broker, *kcat_sasl(broker), "-C", "-t", "kc-topic", "-o", "beginning",
                  "-e", "-c", "2", "-f", "%s\\n"),
        capture_output=True, timeout=WAIT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [b"one", b"two"]


def test_kcat_wrong_password(refusing_broker: BrokerProcess) -> None:
    need_kcat()
    done = subprocess.run(
        kcat_args(refusing_broker, *kcat_sasl(refusing_broker, "wrong"), "-L",
                  "-m", "5"), capture_output=True, timeout=WAIT, check=False)
    assert done.returncode != 0
    assert b"SASL authentication error" in done.stderr, done.stderr


# -- kafkajs -----------------------------------------------------------------------------


def run_kafkajs(broker: BrokerProcess, mechanism: str, password: str) -> Any:
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        pytest.skip("kafkajs is not installed: run `make node-deps`")
    done = subprocess.run(
        [node, str(NODE_DIR / "sasl.js"), broker.kafka_bootstrap, mechanism.lower(), USER,
         password], capture_output=True, timeout=2 * WAIT, check=False, cwd=NODE_DIR)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafkajs_scram(broker: BrokerProcess, mechanism: str) -> None:
    result = run_kafkajs(broker, mechanism, PASSWORD)
    assert result == {"ok": True, "value": "kafkajs-value"}, result


def test_kafkajs_wrong_password(refusing_broker: BrokerProcess) -> None:
    result = run_kafkajs(refusing_broker, "SCRAM-SHA-256", "wrong")
    assert result["ok"] is False
    assert result["error"] == "KafkaJSSASLAuthenticationError", result


def test_unauthenticated_client_is_closed(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap,
                         "error_cb": errors.append})
    producer.produce("never", b"x")
    assert producer.flush(3) == 1  # nothing gets through
    assert any(e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
               for e in errors), errors
    assert "before SASL authentication" in broker.log()
