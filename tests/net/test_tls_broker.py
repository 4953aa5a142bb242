"""A real ``twistd broker`` with ``ssl:`` native and Kafka listeners, and real clients over
TLS: brokerctl and the native client, kcat, confluent-kafka and kafkajs.

Two brokers per module: one with server-side TLS only, one that requires client
certificates (``--ssl-client-auth required``). Certificates come from
:func:`tests.tls_helpers.make_pki`: the server's names ``localhost`` and 127.0.0.1,
which is also what the Kafka listener advertises, so every client verifies the host name.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BROKERCTL, TWISTD, BrokerProcess, env
from tests.control_plane_helpers import confluent
from tests.e2e.test_kafkajs import need_kafkajs, run_script
from tests.kafka_helpers import WAIT, kcat_consume, kcat_produce, kcat_run, need_kcat
from tests.tls_helpers import Pki, TlsBroker, make_pki, ssl_description

pytestmark = pytest.mark.broker

#: The exit status of brokerctl when the broker cannot be reached (TLS failures too).
EXIT_UNREACHABLE = 3


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _start(tmp: Path, pki: Pki, *args: str) -> Iterator[TlsBroker]:
    broker = TlsBroker(tmp / "data", pki, args=args)
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsBroker]:
    """TLS listeners, no client certificates asked for."""
    yield from _start(tmp_path_factory.mktemp("tls"), pki)


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsBroker]:
    """TLS listeners that require a client certificate issued by the test CA."""
    yield from _start(
        tmp_path_factory.mktemp("mtls"),
        pki,
        "--ssl-client-auth=required",
        f"--ssl-client-ca={pki.ca}",
    )


def no_errors_logged(broker: TlsBroker) -> None:
    log = broker.log()
    assert "Traceback" not in log and "Unhandled" not in log, log[-3000:]


# -- brokerctl and the native client --------------------------------------------------


def brokerctl(
    broker: TlsBroker, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BROKERCTL), "--bootstrap", broker.native_bootstrap, *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=env(),
        check=False,
    )


def test_brokerctl_over_tls(broker: TlsBroker) -> None:
    tls = ("--tls", "--cafile", str(broker.pki.ca))
    done = brokerctl(broker, *tls, "topics", "create", "ctl-tls", "--partitions", "2")
    assert done.returncode == 0, done.stderr
    done = brokerctl(broker, *tls, "produce", "ctl-tls", "--partition", "1", stdin=b"a\nb\n")
    assert done.returncode == 0, done.stderr
    # The certificate names localhost too: connecting to 127.0.0.1 while checking that name.
    done = brokerctl(
        broker, *tls, "--tls-server-name", "localhost", "consume", "ctl-tls", "--partition", "1"
    )
    assert (done.returncode, done.stdout) == (0, "a\nb\n"), done.stderr
    done = brokerctl(broker, *tls, "topics", "list")
    assert "ctl-tls\t2" in done.stdout.splitlines(), done


def test_brokerctl_verifies_the_broker(broker: TlsBroker) -> None:
    # Not signed by a CA the system trusts.
    done = brokerctl(broker, "--tls", "topics", "list")
    assert done.returncode == EXIT_UNREACHABLE
    assert "TLS with the broker" in done.stderr and "certificate verify failed" in done.stderr
    # A name the certificate does not carry.
    done = brokerctl(
        broker, "--tls", "--cafile", str(broker.pki.ca), "--tls-server-name", "other.example",
        "topics", "list",
    )
    assert done.returncode == EXIT_UNREACHABLE
    assert "other.example" in done.stderr, done.stderr
    # Plaintext to a TLS listener: refused, not hung.
    done = brokerctl(broker, "topics", "list")
    assert done.returncode == EXIT_UNREACHABLE, done
    no_errors_logged(broker)


def test_brokerctl_tls_options_need_tls(broker: TlsBroker) -> None:
    done = brokerctl(broker, "--cafile", str(broker.pki.ca), "topics", "list")
    assert done.returncode == 2
    assert "--cafile needs --tls" in done.stderr
    done = brokerctl(broker, "--tls", "--cafile", "/nonexistent", "topics", "list")
    assert done.returncode == 2
    assert "TLS settings" in done.stderr


def test_native_client_over_tls(broker: TlsBroker) -> None:
    with broker.tls_client() as client:
        client.create_topic("native-tls")
        assert client.produce("native-tls", 0, [b"x", b"y"]) == 0
        assert client.fetch("native-tls", 0, 0) == [b"x", b"y"]


# -- Kafka clients --------------------------------------------------------------------


def kcat_tls(broker: TlsBroker, cert: bool = False) -> tuple[str, ...]:
    args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={broker.pki.ca}"]
    if cert:
        args += [
            "-X", f"ssl.certificate.location={broker.pki.alice_cert}",
            "-X", f"ssl.key.location={broker.pki.alice_key}",
        ]
    return tuple(args)


@pytest.mark.clients
def test_kcat_over_tls(broker: TlsBroker) -> None:
    need_kcat()
    values = [b"k1", b"k2", b"k3"]
    kcat_produce(broker, "kcat-tls", 0, values, *kcat_tls(broker))
    records = kcat_consume(broker, "kcat-tls", 0, "beginning", *kcat_tls(broker))
    assert records == [(0, i, v) for i, v in enumerate(values)]


def confluent_tls(broker: TlsBroker, **extra: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.kafka_bootstrap,
        "security.protocol": "ssl",
        "ssl.ca.location": str(broker.pki.ca),
        **extra,
    }


def confluent_round_trip(broker: TlsBroker, topic: str, **extra: str) -> list[bytes]:
    """Produce three records and read them back with a consumer group."""
    ck = confluent()
    values = [f"{topic}-{i}".encode() for i in range(3)]
    producer = ck.Producer(confluent_tls(broker, **extra, acks="all"))
    failures: list[Any] = []
    for value in values:
        producer.produce(
            topic, value=value, on_delivery=lambda err, _m: err and failures.append(err)
        )
    assert producer.flush(WAIT) == 0 and not failures, failures
    consumer = ck.Consumer(
        confluent_tls(
            broker, **extra, **{"group.id": f"{topic}-g", "auto.offset.reset": "earliest"}
        )
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert not msg.error(), msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == values
    return got


@pytest.mark.clients
def test_confluent_kafka_over_tls(broker: TlsBroker) -> None:
    # librdkafka verifies the broker's name (ssl.endpoint.identification.algorithm is
    # https by default): the advertised 127.0.0.1 is in the certificate.
    confluent_round_trip(broker, "ck-tls")


@pytest.mark.clients
def test_kafkajs_over_tls(broker: TlsBroker) -> None:
    need_kafkajs()
    result = run_script("tls.js", broker.kafka_bootstrap, str(broker.pki.ca), "js-tls", "3")
    assert "error" not in result, result
    assert result["consumed"] == [[i, f"tls-{i}"] for i in range(3)]


@pytest.mark.clients
def test_plaintext_kafka_client_to_the_tls_port(broker: TlsBroker) -> None:
    """An ApiVersions request in plaintext gets no answer and the connection closes; the
    listener keeps serving TLS clients."""
    header = RequestHeader(ApiKey.API_VERSIONS, 0, 1, "plain")
    frame = apis.encode_request(header, apis.ApiVersionsRequest())
    received = b""
    with socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=WAIT) as sock:
        sock.sendall(frame)
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    # At most a TLS alert record (content type 21), never a Kafka answer.
    assert received[:1] in (b"", b"\x15"), received
    confluent_round_trip(broker, "ck-after-plain")
    no_errors_logged(broker)


# -- required client certificates ----------------------------------------------------


def test_required_client_certificate_native(mtls_broker: TlsBroker) -> None:
    pki = mtls_broker.pki
    base = ("--tls", "--cafile", str(pki.ca))
    done = brokerctl(mtls_broker, *base, "topics", "list")
    assert done.returncode == EXIT_UNREACHABLE, done
    done = brokerctl(
        mtls_broker, *base, "--certfile", str(pki.mallory_cert), "--keyfile",
        str(pki.mallory_key), "topics", "list",
    )
    assert done.returncode == EXIT_UNREACHABLE, done
    alice = ("--certfile", str(pki.alice_cert), "--keyfile", str(pki.alice_key))
    done = brokerctl(mtls_broker, *base, *alice, "topics", "create", "mtls")
    assert done.returncode == 0, done.stderr
    with mtls_broker.tls_client(cert=pki.alice_cert, key=pki.alice_key) as client:
        assert client.produce("mtls", 0, [b"from alice"]) == 0
    no_errors_logged(mtls_broker)


@pytest.mark.clients
def test_required_client_certificate_kafka(mtls_broker: TlsBroker) -> None:
    need_kcat()
    # No certificate: kcat cannot get metadata.
    done = subprocess.run(
        [need_kcat(), "-b", mtls_broker.kafka_bootstrap, "-L", "-m", "3",
         *kcat_tls(mtls_broker)],
        capture_output=True, timeout=WAIT, check=False,
    )
    assert done.returncode != 0, done
    done = kcat_run(mtls_broker, "-L", "-m", "10", *kcat_tls(mtls_broker, cert=True))
    assert f"127.0.0.1:{mtls_broker.kafka_port}".encode() in done.stdout
    confluent_round_trip(
        mtls_broker,
        "ck-mtls",
        **{
            "ssl.certificate.location": str(mtls_broker.pki.alice_cert),
            "ssl.key.location": str(mtls_broker.pki.alice_key),
        },
    )
    no_errors_logged(mtls_broker)


@pytest.mark.clients
def test_kafkajs_with_a_client_certificate(mtls_broker: TlsBroker) -> None:
    need_kafkajs()
    pki = mtls_broker.pki
    result = run_script(
        "tls.js", mtls_broker.kafka_bootstrap, str(pki.ca), "js-mtls", "2",
        str(pki.alice_cert), str(pki.alice_key),
    )
    assert "error" not in result, result
    assert result["consumed"] == [[0, "tls-0"], [1, "tls-1"]]
    result = run_script("tls.js", mtls_broker.kafka_bootstrap, str(pki.ca), "js-nocert", "1")
    assert "error" in result and result["consumed"] == [], result


# -- start-up ---------------------------------------------------------------------------


def test_client_auth_without_an_ssl_listener_refuses_to_start(tmp_path: Path, pki: Pki) -> None:
    done = subprocess.run(
        [str(TWISTD), "--nodaemon", "--pidfile=", "broker", f"--data-dir={tmp_path / 'd'}",
         "--ssl-client-auth=required", f"--ssl-client-ca={pki.ca}"],
        capture_output=True, text=True, timeout=60, env=env(), check=False,
    )
    assert done.returncode != 0
    assert "--ssl-client-auth required needs an ssl: listener" in done.stdout + done.stderr


def test_listeners_log_their_tls_port(broker: TlsBroker) -> None:
    # The Kafka listener's bound port is reported (and advertised) as for tcp:.
    log = broker.log()
    assert f"advertised as 127.0.0.1:{broker.kafka_port}" in log, log[-2000:]


@pytest.mark.clients
def test_a_plaintext_listener_beside_client_auth_is_warned_about(
    tmp_path: Path, pki: Pki
) -> None:
    proc = BrokerProcess(tmp_path / "data")
    assert proc.kafka_port is not None
    proc.args = (
        f"--kafka={ssl_description(proc.kafka_port, pki)}",
        "--ssl-client-auth=required",
        f"--ssl-client-ca={pki.ca}",
        "--allow-anonymous=native",
    )
    proc.start()
    try:
        # The plaintext native listener serves; the Kafka one wants a certificate.
        with proc.client() as client:
            client.create_topic("mixed")
        log = proc.log()
        assert f"Listener tcp:{proc.native_port}:interface=127.0.0.1 is plaintext" in log, log
        done = subprocess.run(
            [need_kcat(), "-b", proc.kafka_bootstrap, "-L", "-m", "3",
             "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca}"],
            capture_output=True, timeout=WAIT, check=False,
        )
        assert done.returncode != 0, done
    finally:
        proc.kill()
