"""A service with a stale password does not lock out its neighbours: against a real
``twistd broker --sasl SCRAM-SHA-256``, a confluent-kafka producer retries a wrong
password for a few seconds while correct clients connect from the same address
(127.0.0.1), as other services on the same host or behind the same NAT would. Every
correct login succeeds; the stale client's failures are answered late and later."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.security.auth_throttle import MAX_DELAY

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.kafka.server.handlers.test_sasl_clients import PASSWORD, USER, ck_conf, write_credentials

pytestmark = [pytest.mark.clients, pytest.mark.broker]

STALE_SECONDS = 4.0
CORRECT_LOGINS = 10


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    creds = write_credentials(tmp_path / "credentials.json")
    proc = BrokerProcess(tmp_path / "data", args=(
        "--sasl", "SCRAM-SHA-256", "--credentials", creds), native=False).start()
    try:
        yield proc
    finally:
        proc.kill()


def run_stale_client(conf: dict[str, Any], stop: threading.Event, errors: list[float]) -> None:
    """A producer with a wrong password, polled until ``stop``; the time of each
    authentication error goes into ``errors``."""
    from confluent_kafka import KafkaError, Producer

    def on_error(error: Any) -> None:
        if error.code() == KafkaError._AUTHENTICATION:
            errors.append(time.monotonic())

    producer = Producer({**conf, "error_cb": on_error, "reconnect.backoff.ms": 10,
                         "reconnect.backoff.max.ms": 50})
    producer.produce("stale", b"never stored")
    while not stop.is_set():
        producer.poll(0.05)
    producer.purge()


def login_seconds(conf: dict[str, Any]) -> float:
    """A new client's first authenticated request (Metadata), timed."""
    from confluent_kafka.admin import AdminClient

    started = time.monotonic()
    AdminClient(conf).list_topics(timeout=MAX_DELAY + 10)
    return time.monotonic() - started


def test_stale_password_beside_correct_clients(broker: BrokerProcess) -> None:
    stop = threading.Event()
    errors: list[float] = []
    stale = threading.Thread(target=run_stale_client, args=(
        ck_conf(broker, password="stale-password"), stop, errors))
    started = time.monotonic()
    stale.start()
    try:
        time.sleep(1.0)  # several failures answered by now
        other_user = [login_seconds(ck_conf(broker, user="admin", password="admin-secret"))
                      for _ in range(CORRECT_LOGINS)]
        # The same user name from the same address, right password: held at worst
        # for the stale client's backoff, never refused.
        same_user = login_seconds(ck_conf(broker, user=USER, password=PASSWORD))
        while time.monotonic() - started < STALE_SECONDS:
            time.sleep(0.1)
    finally:
        stop.set()
        stale.join(30)
    elapsed = time.monotonic() - started
    assert len(errors) >= 2, "the stale client saw no authentication error"
    gaps = [b - a for a, b in itertools.pairwise(errors)]
    # librdkafka reconnects within 50 ms here; the broker's answers are what space the
    # errors out, so they arrive far slower than the client retries.
    assert len(errors) < elapsed / 0.2, errors
    assert max(other_user) < 5, other_user
    assert same_user < MAX_DELAY + 5, same_user
    log = broker.log()
    assert "failures not logged" in log or log.count("SASL authentication from") <= 3
    record("a stale-password client beside a correct one from the same address",
           f"{len(errors)} failures answered in {elapsed:.1f} s (largest gap "
           f"{max(gaps, default=0):.1f} s); correct logins {len(other_user)}/"
           f"{CORRECT_LOGINS} (slowest {max(other_user):.2f} s), same user {same_user:.2f} s")
