"""SASL on the Kafka protocol: the authentication gate, SaslHandshake v0/v1,
SaslAuthenticate v0-2, and the SCRAM credential admin APIs, with ``StringTransport``,
``task.Clock`` and a real credentials file."""

from __future__ import annotations

import os
import struct
from typing import Any

import attrs
from twisted.internet import task
from twisted.logger import formatEvent, globalLogPublisher

from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS, ListenerSecurity
from brokerd.kafka.listener.protocol import (
    FAILED_AUTHENTICATION_CLOSE_DELAY,
    KafkaFactory,
    KafkaProtocol,
)
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.sasl_session import SaslCode, SaslConfig, SaslSession
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.messages import sasl as m
from brokerd.kafka.wire.requests import apis
from brokerd.security.auth_throttle import DEFAULT_DELAY, LOG_INTERVAL, MAX_DELAY, AuthThrottle
from brokerd.security.credentials import CredentialChange, CredentialStore
from brokerd.security.scram import SCRAM_SHA_256, SCRAM_SHA_512

from tests.fake_core import FakeCore
from tests.kafka.listener.test_protocol import FakeCoordinator, KafkaTestCase, temp_dir
from tests.kafka.server.test_sasl_session import ScramClient, temp_path

MECHS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


class SaslProtocolTestCase(KafkaTestCase):
    tls = False

    def setUp(self) -> None:
        self.core = FakeCore()
        self.groups = FakeCoordinator(temp_dir(self))
        self.addCleanup(self.groups.close)
        self.clock = task.Clock()
        path = temp_path(self)
        self.store = CredentialStore.open(path, create=True, clock=self.clock.seconds)
        self.store.alter([
            CredentialChange("alice", m_.name, m_.credential("wonderland"))
            for m_ in (SCRAM_SHA_256, SCRAM_SHA_512)
        ])
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=4096),
            security=ListenerSecurity(
                sasl=SaslConfig(MECHS, self.store, AuthThrottle(self.clock.seconds)),
                credentials=self.store,
            ),
        )
        self.proto, self.tr = self.connect()
        self._correlation = 0
        self._sent: dict[int, tuple[ApiKey, int]] = {}

    def connect(self) -> tuple[KafkaProtocol, Any]:
        proto, tr = super().connect()
        if self.tls:
            # What a TLS listener's connection has; the session is made again from it.
            proto.state.tls = True
            assert self.factory.sasl is not None
            proto.dispatcher.sasl = SaslSession(
                self.factory.sasl, tls=True, peer=proto.state.peer_host)
        return proto, tr

    def answered(self) -> Any:
        """The one response to the request just sent, advancing the clock until it is
        written (a held answer); :attr:`waited` says how long that took."""
        started = self.clock.seconds()
        while not self.tr.value():
            due = min(c.getTime() for c in self.clock.getDelayedCalls())
            if due - started > MAX_DELAY:
                break
            self.clock.advance(due - self.clock.seconds())
        self.waited = round(self.clock.seconds() - started, 6)
        return self.one()

    def handshake(self, mechanism: str, version: int = 1) -> m.SaslHandshakeResponse:
        self.send(ApiKey.SASL_HANDSHAKE, version, m.SaslHandshakeRequest(mechanism=mechanism))
        response: m.SaslHandshakeResponse = self.answered()
        return response

    def authenticate(self, token: bytes, version: int = 2) -> m.SaslAuthenticateResponse:
        self.send(ApiKey.SASL_AUTHENTICATE, version, m.SaslAuthenticateRequest(auth_bytes=token))
        response: m.SaslAuthenticateResponse = self.answered()
        return response

    def scram_login(self, password: str, mech: Any = SCRAM_SHA_256,
                    version: int = 2) -> m.SaslAuthenticateResponse:
        self.assertEqual(self.handshake(mech.name).error_code, 0)
        client = ScramClient(mech, "alice", password)
        first = self.authenticate(client.first(), version)
        self.assertEqual(first.error_code, 0)
        return self.authenticate(client.final(first.auth_bytes), version)

    def assertClosedAfterDelay(self) -> None:
        self.assertFalse(self.tr.disconnecting)
        self.clock.advance(FAILED_AUTHENTICATION_CLOSE_DELAY)
        self.assertTrue(self.tr.disconnecting)

    def metadata(self) -> None:
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))


class GateTests(SaslProtocolTestCase):
    def test_request_before_authentication_closes(self) -> None:
        self.metadata()
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnecting)

    def test_api_versions_allowed_and_advertises_sasl(self) -> None:
        self.send(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
        keys = {k.api_key: (k.min_version, k.max_version) for k in self.one().api_keys}
        self.assertEqual(keys[17], (0, 1))
        self.assertEqual(keys[36], (0, 2))
        self.assertEqual(keys[50], (0, 0))
        self.assertEqual(keys[51], (0, 0))
        self.assertFalse(self.tr.disconnecting)

    def test_unsupported_mechanism_lists_enabled(self) -> None:
        response = self.handshake("GSSAPI")
        self.assertEqual(response.error_code, SaslCode.UNSUPPORTED_SASL_MECHANISM)
        # PLAIN is not offered on a plaintext connection.
        self.assertEqual(response.mechanisms, ("SCRAM-SHA-256", "SCRAM-SHA-512"))
        self.assertClosedAfterDelay()

    def test_plain_refused_on_plaintext(self) -> None:
        response = self.handshake("PLAIN")
        self.assertEqual(response.error_code, SaslCode.UNSUPPORTED_SASL_MECHANISM)
        self.assertClosedAfterDelay()

    def test_scram_success_then_requests_served(self) -> None:
        for version in (0, 1, 2):
            self.proto, self.tr = self.connect()
            self.assertEqual(self.proto.state.principal, "User:ANONYMOUS")
            final = self.scram_login("wonderland", SCRAM_SHA_512, version)
            self.assertEqual(final.error_code, 0)
            self.assertTrue(final.auth_bytes.startswith(b"v="))
            self.assertEqual(final.session_lifetime_ms, 0)
            self.assertEqual(self.proto.state.principal, "User:alice")
            self.metadata()
            self.assertIsInstance(self.one(), apis.MetadataResponse)
            self.assertFalse(self.tr.disconnecting)

    def test_wrong_password(self) -> None:
        final = self.scram_login("nope")
        self.assertEqual(final.error_code, SaslCode.SASL_AUTHENTICATION_FAILED)
        self.assertIn("authentication failed", final.error_message or "")
        # Nothing is served in the delay before the close.
        self.metadata()
        self.assertEqual(self.tr.value(), b"")
        self.assertClosedAfterDelay()
        self.assertEqual(self.proto.state.principal, "User:ANONYMOUS")
        self.flushLoggedErrors()

    def test_authenticate_before_handshake(self) -> None:
        response = self.authenticate(b"n,,n=alice,r=abc")
        self.assertEqual(response.error_code, SaslCode.ILLEGAL_SASL_STATE)
        self.assertClosedAfterDelay()

    def test_second_handshake_after_success(self) -> None:
        self.scram_login("wonderland")
        response = self.handshake("SCRAM-SHA-256")
        self.assertEqual(response.error_code, SaslCode.ILLEGAL_SASL_STATE)
        self.assertFalse(self.tr.disconnecting)
        self.assertEqual(self.proto.state.principal, "User:alice")

    def test_failure_answer_waits_without_blocking(self) -> None:
        self.assertEqual(self.handshake("SCRAM-SHA-256").error_code, 0)
        client = ScramClient(SCRAM_SHA_256, "alice", "nope")
        first = self.authenticate(client.first())
        self.assertEqual(self.waited, 0)  # server-first is never held
        self.send(ApiKey.SASL_AUTHENTICATE, 2,
                  m.SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
        # Held on the clock: nothing yet, and another connection is served meanwhile.
        self.assertEqual(self.tr.value(), b"")
        other, other_tr = self.connect()
        other.dataReceived(self.frame(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest()))
        self.assertNotEqual(other_tr.value(), b"")
        self.clock.advance(DEFAULT_DELAY)
        failed = self.one()
        self.assertEqual(failed.error_code, SaslCode.SASL_AUTHENTICATION_FAILED)
        self.assertClosedAfterDelay()

    def test_stale_password_beside_correct_logins_from_the_same_address(self) -> None:
        # A client retrying a stale password as soon as each answer arrives, and correct
        # logins of the same and of another user, all from 10.1.2.3.
        self.store.alter([CredentialChange("bob", "SCRAM-SHA-256",
                                           SCRAM_SHA_256.credential("builder"))])
        waits = []
        for _ in range(10):
            self.proto, self.tr = self.connect()
            self.assertEqual(self.scram_login("stale").error_code,
                             SaslCode.SASL_AUTHENTICATION_FAILED)
            waits.append(self.waited)
            self.proto, self.tr = self.connect()
            self.handshake("SCRAM-SHA-256")
            bob = ScramClient(SCRAM_SHA_256, "bob", "builder")
            first = self.authenticate(bob.first())
            self.assertEqual(self.authenticate(bob.final(first.auth_bytes)).error_code, 0)
            self.assertEqual(self.waited, 0)  # another user is never slowed
        self.assertEqual(waits[:3], [0.1, 0.2, 0.4])
        self.assertEqual(max(waits), MAX_DELAY)
        # The same user with the right password: accepted, at worst after the backoff.
        self.proto, self.tr = self.connect()
        self.assertEqual(self.scram_login("wonderland").error_code, 0)
        self.assertLessEqual(self.waited, MAX_DELAY)
        self.assertEqual(self.proto.state.principal, "User:alice")
        self.flushLoggedErrors()

    def test_failure_log_lines_are_rate_limited(self) -> None:
        lines: list[str] = []

        def observe(event: dict[str, Any]) -> None:
            text = formatEvent(event)
            if "SASL authentication from" in text:
                lines.append(text)

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        for _ in range(4):
            self.proto, self.tr = self.connect()
            self.scram_login("stale")
        self.assertEqual(len(lines), 1)
        self.clock.advance(LOG_INTERVAL)
        self.proto, self.tr = self.connect()
        self.scram_login("stale")
        self.assertEqual(len(lines), 2)
        self.assertIn("3 more SCRAM-SHA-256 failures not logged", lines[1])

    def test_credentials_reloaded_without_restart(self) -> None:
        # Another process (brokerctl) rewrites the file: seen on the next login.
        other = CredentialStore.open(self.store.path)
        other.alter([CredentialChange("alice", "SCRAM-SHA-256",
                                      SCRAM_SHA_256.credential("changed"))])
        self.clock.advance(2)
        self.assertEqual(self.scram_login("changed").error_code, 0)

    def test_raw_tokens_after_handshake_v0(self) -> None:
        self.assertEqual(self.handshake("SCRAM-SHA-256", version=0).error_code, 0)
        client = ScramClient(SCRAM_SHA_256, "alice", "wonderland")
        self.proto.dataReceived(codec.frame(client.first()))
        frames = codec.FrameDecoder().feed(self.tr.value())
        self.tr.clear()
        self.assertEqual(len(frames), 1)
        self.proto.dataReceived(codec.frame(client.final(frames[0])))
        (final,) = codec.FrameDecoder().feed(self.tr.value())
        self.tr.clear()
        self.assertTrue(final.startswith(b"v="))
        self.assertEqual(self.proto.state.principal, "User:alice")
        # Back to Kafka requests.
        self.metadata()
        self.assertIsInstance(self.one(), apis.MetadataResponse)

    def test_raw_token_answer_held_after_failures_then_served(self) -> None:
        for _ in range(2):
            self.proto, self.tr = self.connect()
            self.assertEqual(self.scram_login("stale").error_code,
                             SaslCode.SASL_AUTHENTICATION_FAILED)
        # A third failure, its answer not waited for (it comes in 0.4 s)...
        self.proto, self.tr = self.connect()
        self.handshake("SCRAM-SHA-256")
        stale = ScramClient(SCRAM_SHA_256, "alice", "stale")
        first_answer = self.authenticate(stale.first())
        self.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(
            auth_bytes=stale.final(first_answer.auth_bytes)))
        # ...and at once the right password, with raw tokens: held as long.
        self.proto, self.tr = self.connect()
        self.assertEqual(self.handshake("SCRAM-SHA-256", version=0).error_code, 0)
        client = ScramClient(SCRAM_SHA_256, "alice", "wonderland")
        self.proto.dataReceived(codec.frame(client.first()))
        (first,) = codec.FrameDecoder().feed(self.tr.value())
        self.tr.clear()
        self.proto.dataReceived(codec.frame(client.final(first)))
        self.metadata()  # pipelined behind the held answer
        self.assertEqual(self.tr.value(), b"")
        self.clock.advance(0.4)
        (size,) = struct.unpack(">i", self.tr.value()[:4])
        final = self.tr.value()[4:4 + size]
        self.assertTrue(final.startswith(b"v="))
        rest = self.tr.value()[4 + size:]
        self.tr.clear()
        self.assertEqual(self.proto.state.principal, "User:alice")
        self.tr.write(rest)
        self.assertIsInstance(self.one(), apis.MetadataResponse)

    def test_raw_token_failure_closes_without_answer(self) -> None:
        self.handshake("SCRAM-SHA-256", version=0)
        self.proto.dataReceived(codec.frame(b"garbage"))
        self.assertEqual(self.tr.value(), b"")
        self.assertFalse(self.tr.disconnecting)  # the failure's delay first
        self.clock.advance(DEFAULT_DELAY)
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnecting)

    def test_malformed_authenticate_closes(self) -> None:
        self.handshake("SCRAM-SHA-256")
        header = codec.encode_request_header(
            RequestHeader(int(ApiKey.SASL_AUTHENTICATE), 1, 9, "x"))
        self.proto.dataReceived(codec.frame(header + struct.pack(">i", 4000)))
        self.assertTrue(self.tr.disconnecting)


class PlainOverTlsTests(SaslProtocolTestCase):
    tls = True

    def test_plain(self) -> None:
        response = self.handshake("PLAIN")
        self.assertEqual(response.error_code, 0)
        self.assertEqual(response.mechanisms, MECHS)
        self.assertEqual(self.authenticate(b"\x00alice\x00wonderland", 1).error_code, 0)
        self.assertEqual(self.proto.state.principal, "User:alice")

    def test_plain_wrong_password(self) -> None:
        self.handshake("PLAIN")
        response = self.authenticate(b"\x00alice\x00wrong", 0)
        self.assertEqual(response.error_code, SaslCode.SASL_AUTHENTICATION_FAILED)
        self.assertClosedAfterDelay()


class NoSaslTests(KafkaTestCase):
    def test_sasl_requests_without_sasl(self) -> None:
        self.send(ApiKey.SASL_HANDSHAKE, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
        self.assertEqual(self.one().error_code, SaslCode.ILLEGAL_SASL_STATE)
        self.send(ApiKey.SASL_AUTHENTICATE, 1, m.SaslAuthenticateRequest(auth_bytes=b"x"))
        self.assertEqual(self.one().error_code, SaslCode.ILLEGAL_SASL_STATE)
        self.assertEqual(self.proto.state.principal, "User:ANONYMOUS")
        # The error is per user; the request-level error stays 0 (librdkafka crashes
        # on a request-level one).
        self.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                  m.DescribeUserScramCredentialsRequest(users=None))
        everyone = self.one()
        self.assertEqual((everyone.error_code, everyone.error_message), (0, None))
        self.assertEqual([(r.user, r.error_code) for r in everyone.results],
                         [("", SaslCode.SECURITY_DISABLED)])
        self.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                  m.DescribeUserScramCredentialsRequest(
                      users=(m.UserName(name="a"), m.UserName(name="b"))))
        named = self.one()
        self.assertEqual(named.error_code, 0)
        self.assertEqual([(r.user, r.error_code) for r in named.results],
                         [("a", SaslCode.SECURITY_DISABLED), ("b", SaslCode.SECURITY_DISABLED)])
        self.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, m.AlterUserScramCredentialsRequest(
            deletions=(m.ScramCredentialDeletion(name="a", mechanism=1),)))
        self.assertEqual(self.one().results[0].error_code, SaslCode.SECURITY_DISABLED)


class ScramAdminTests(SaslProtocolTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.assertEqual(self.scram_login("wonderland").error_code, 0)

    def describe(self, *names: str | None) -> m.DescribeUserScramCredentialsResponse:
        users = None if names == (None,) else tuple(m.UserName(name=n) for n in names if n)
        self.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                  m.DescribeUserScramCredentialsRequest(users=users))
        response: m.DescribeUserScramCredentialsResponse = self.one()
        return response

    def alter(self, deletions: tuple[Any, ...] = (),
              upsertions: tuple[Any, ...] = ()) -> dict[str, tuple[int, str | None]]:
        self.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, m.AlterUserScramCredentialsRequest(
            deletions=deletions, upsertions=upsertions))
        return {r.user: (r.error_code, r.error_message) for r in self.one().results}

    @staticmethod
    def upsert(name: str, password: str, mech: Any = SCRAM_SHA_256, iterations: int = 4096,
               salt: bytes = b"0123456789abcdef") -> m.ScramCredentialUpsertion:
        return m.ScramCredentialUpsertion(
            name=name, mechanism=mech.code, iterations=iterations, salt=salt,
            salted_password=mech.salted_password(password, salt, iterations))

    def test_describe(self) -> None:
        everyone = self.describe(None)
        self.assertEqual(everyone.error_code, 0)
        (alice,) = everyone.results
        self.assertEqual(alice.user, "alice")
        self.assertEqual([(c.mechanism, c.iterations) for c in alice.credential_infos],
                         [(1, 4096), (2, 4096)])
        missing = self.describe("bob", "alice")
        codes = {r.user: r.error_code for r in missing.results}
        self.assertEqual(codes, {"bob": SaslCode.RESOURCE_NOT_FOUND, "alice": 0})
        dup = self.describe("alice", "alice")
        self.assertEqual(dup.results[0].error_code, SaslCode.DUPLICATE_RESOURCE)

    def test_alter_then_login(self) -> None:
        self.assertEqual(self.alter(upsertions=(self.upsert("bob", "builder"),)),
                         {"bob": (0, None)})
        self.assertEqual(self.describe("bob").results[0].credential_infos[0].iterations, 4096)
        self.proto, self.tr = self.connect()
        self.handshake("SCRAM-SHA-256")
        client = ScramClient(SCRAM_SHA_256, "bob", "builder")
        first = self.authenticate(client.first())
        self.assertEqual(self.authenticate(client.final(first.auth_bytes)).error_code, 0)
        self.assertEqual(self.proto.state.principal, "User:bob")
        # The file holds the derived keys, never the salted password.
        with open(self.store.path, "rb") as f:
            data = f.read()
        self.assertNotIn(self.upsert("bob", "builder").salted_password.hex().encode(), data)

    def test_alter_errors_are_per_user(self) -> None:
        results = self.alter(
            deletions=(m.ScramCredentialDeletion(name="nobody", mechanism=1),
                       m.ScramCredentialDeletion(name="carol", mechanism=9)),
            upsertions=(self.upsert("dave", "x", iterations=100),
                        self.upsert("erin", "x", iterations=20000),
                        self.upsert("", "x"),
                        self.upsert("frank", "x"), self.upsert("frank", "y"),
                        m.ScramCredentialUpsertion(name="gina", mechanism=1, iterations=4096,
                                                   salt=b"s", salted_password=b"short"),
                        self.upsert("hank", "ok", SCRAM_SHA_512)),
        )
        self.assertEqual(results["nobody"][0], SaslCode.RESOURCE_NOT_FOUND)
        self.assertEqual(results["carol"][0], SaslCode.UNSUPPORTED_SASL_MECHANISM)
        self.assertEqual(results["dave"][0], SaslCode.UNACCEPTABLE_CREDENTIAL)
        self.assertEqual(results["erin"][0], SaslCode.UNACCEPTABLE_CREDENTIAL)
        self.assertEqual(results[""][0], SaslCode.UNACCEPTABLE_CREDENTIAL)
        self.assertEqual(results["frank"][0], SaslCode.DUPLICATE_RESOURCE)
        self.assertEqual(results["gina"][0], SaslCode.UNACCEPTABLE_CREDENTIAL)
        self.assertEqual(results["hank"], (0, None))
        self.assertEqual(sorted(self.store.users()), ["alice", "hank"])

    def test_delete(self) -> None:
        results = self.alter(deletions=(m.ScramCredentialDeletion(name="alice", mechanism=2),))
        self.assertEqual(results, {"alice": (0, None)})
        self.assertEqual(list(self.store.credentials_of("alice")), ["SCRAM-SHA-256"])

    def test_write_failure_reported(self) -> None:
        # A directory that does not exist (any more): the rewrite fails, nothing is lost.
        self.store.path = os.path.join(temp_path(self), "credentials.json")
        results = self.alter(upsertions=(self.upsert("bob", "x"),))
        self.assertEqual(results["bob"][0], SaslCode.UNKNOWN_SERVER_ERROR)
        self.flushLoggedErrors()
