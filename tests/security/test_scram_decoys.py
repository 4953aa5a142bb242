"""SCRAM does not tell which user names exist: an unknown name gets a salt and iteration
count derived from the broker's secret and the name, the same on every attempt and after
a restart, as a real user's are. Sans-IO checks of the decoys and the secret file, then a
real broker answering client-first messages over a socket."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import sasl as m
from brokerd.security.scram import (
    DEFAULT_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    DecoyCredentials,
    ScramCredential,
    ScramMechanism,
    ScramServer,
)
from brokerd.security.server_secret import SECRET_FILE_NAME, ServerSecretError, load_or_create

from tests.brokerproc import BrokerProcess
from tests.kafka.server.handlers.test_sasl_clients import write_credentials
from tests.kafka_helpers import RawKafka

SECRET = b"0123456789abcdef0123456789abcdef"


def server_first(
    mech: ScramMechanism, users: dict[str, ScramCredential], name: str, secret: bytes = SECRET
) -> tuple[str, str]:
    """(salt, iterations) a fresh exchange answers for ``name``."""
    server = ScramServer(mech, users.get, DecoyCredentials(secret))
    answer = dict(part.split("=", 1) for part in
                  server.first(f"n,,n={name},r=clientnonce".encode()).decode().split(","))
    return answer["s"], answer["i"]


class DecoyTests(SynchronousTestCase):
    def test_unknown_name_gets_the_same_salt_on_every_attempt(self) -> None:
        for mech in (SCRAM_SHA_256, SCRAM_SHA_512):
            first = server_first(mech, {}, "ghost")
            self.assertEqual(server_first(mech, {}, "ghost"), first)
            self.assertEqual(first[1], str(DEFAULT_ITERATIONS))
            # Another name, mechanism or secret: another salt.
            self.assertNotEqual(server_first(mech, {}, "phantom")[0], first[0])
            self.assertNotEqual(server_first(mech, {}, "ghost", b"x" * 32)[0], first[0])
        self.assertNotEqual(server_first(SCRAM_SHA_256, {}, "ghost"),
                            server_first(SCRAM_SHA_512, {}, "ghost"))

    def test_real_and_made_up_salts_look_alike(self) -> None:
        real = SCRAM_SHA_256.credential("pw")
        salt, iterations = server_first(SCRAM_SHA_256, {"alice": real}, "alice")
        ghost_salt, ghost_iterations = server_first(SCRAM_SHA_256, {}, "ghost")
        self.assertEqual(iterations, ghost_iterations)
        self.assertEqual(len(salt), len(ghost_salt))  # same length of base64

    def test_every_name_costs_a_decoy(self) -> None:
        made: list[str] = []

        class Counting(DecoyCredentials):
            def credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential:
                made.append(username)
                return super().credential(mechanism, username)

        known = {"alice": SCRAM_SHA_256.credential("pw")}
        for name in ("alice", "ghost"):
            ScramServer(SCRAM_SHA_256, known.get, Counting(SECRET)).first(
                f"n,,n={name},r=abc".encode())
        self.assertEqual(made, ["alice", "ghost"])

    def test_short_secret_refused(self) -> None:
        with self.assertRaises(ValueError):
            DecoyCredentials(b"short")


def test_secret_made_once_private_and_kept(tmp_path: Path) -> None:
    secret = load_or_create(str(tmp_path))
    path = tmp_path / SECRET_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(secret) == 32
    assert load_or_create(str(tmp_path)) == secret


@pytest.mark.parametrize("content", [b"not hex\n", b"abcd\n", b"0" * 5000])
def test_bad_secret_file_is_an_error_not_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / SECRET_FILE_NAME
    path.write_bytes(content)
    with pytest.raises(ServerSecretError):
        load_or_create(str(tmp_path))
    assert path.read_bytes() == content


# -- a real broker ----------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    creds = write_credentials(tmp_path / "credentials.json")
    proc = BrokerProcess(tmp_path / "data", args=(
        "--sasl", "SCRAM-SHA-256,SCRAM-SHA-512", "--credentials", creds), native=False).start()
    try:
        yield proc
    finally:
        proc.kill()


def salt_from_broker(broker: BrokerProcess, name: str, mechanism: str) -> tuple[str, str]:
    with RawKafka(broker) as conn:
        shake = conn.call(ApiKey.SASL_HANDSHAKE, 1, m.SaslHandshakeRequest(mechanism=mechanism))
        assert shake.error_code == 0
        answer = conn.call(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(
            auth_bytes=f"n,,n={name},r=clientnonce{os.getpid()}".encode()))
        assert answer.error_code == 0, answer
        fields = dict(p.split("=", 1) for p in answer.auth_bytes.decode().split(","))
        return fields["s"], fields["i"]


def test_broker_answers_unknown_names_stably_across_a_restart(broker: BrokerProcess) -> None:
    mechs = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    before = {mech: salt_from_broker(broker, "ghost", mech) for mech in mechs}
    for mech in mechs:
        assert salt_from_broker(broker, "ghost", mech) == before[mech]
        # Iterations as a real user created with the defaults has.
        assert before[mech][1] == salt_from_broker(broker, "alice", mech)[1]
    secret = broker.data_dir / SECRET_FILE_NAME
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    broker.kill()
    broker.start()
    assert {mech: salt_from_broker(broker, "ghost", mech) for mech in mechs} == before
