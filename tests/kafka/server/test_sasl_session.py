"""Sans-IO tests of SCRAM (RFC 5802/7677), PLAIN, the SASL session and its failure throttle."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import tempfile

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.server.sasl_session import (
    SaslCode,
    SaslConfig,
    SaslFailed,
    SaslSession,
    parse_mechanisms,
)
from brokerd.security.auth_throttle import DEFAULT_DELAY, MAX_DELAY, AuthThrottle
from brokerd.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    DecoyCredentials,
    ScramCredential,
    ScramError,
    ScramMechanism,
    ScramServer,
    escape_username,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
DECOYS = DecoyCredentials(b"a test secret of 32 bytes long!!")


def rfc_credential() -> ScramCredential:
    return SCRAM_SHA_256.credential("pencil", salt=RFC_SALT, iterations=4096)


def temp_path(case: SynchronousTestCase) -> str:
    """A fresh path in a directory removed after the test (trial's mktemp() would create
    directories under the current directory)."""
    tmp = tempfile.TemporaryDirectory(prefix="brokerd-sasl-")
    case.addCleanup(tmp.cleanup)
    return os.path.join(tmp.name, "credentials.json")


class ScramClient:
    """A minimal RFC 5802 client, to drive the server the way Kafka clients do."""

    def __init__(self, mech: ScramMechanism, user: str, password: str,
                 nonce: str = "clientnonce123") -> None:
        self.mech, self.password = mech, password
        self.bare = f"n={escape_username(user)},r={nonce}"

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes, echo_nonce: str | None = None) -> bytes:
        attrs = dict(p.split("=", 1) for p in server_first.decode().split(","))
        if echo_nonce is not None:
            attrs["r"] = echo_nonce
        salt = base64.b64decode(attrs["s"])
        salted = self.mech.salted_password(self.password, salt, int(attrs["i"]))
        client_key = self.mech.hmac(salted, b"Client Key")
        without = f"c=biws,r={attrs['r']}"
        auth = f"{self.bare},{server_first.decode()},{without}".encode()
        sig = self.mech.hmac(self.mech.h(client_key), auth)
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        self.server_signature = self.mech.hmac(
            self.mech.hmac(salted, b"Server Key"), auth)
        return f"{without},p={base64.b64encode(proof).decode()}".encode()


class Store:
    def __init__(self) -> None:
        self.creds: dict[tuple[str, str], ScramCredential] = {}

    def add(self, user: str, password: str, *mechs: ScramMechanism) -> None:
        for m in mechs or (SCRAM_SHA_256, SCRAM_SHA_512):
            self.creds[(user, m.name)] = m.credential(password)

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.creds.get((user, mechanism))


class ScramRfcVectorTests(SynchronousTestCase):
    def test_rfc7677_vector(self) -> None:
        server = ScramServer(SCRAM_SHA_256, {"user": rfc_credential()}.get, DECOYS,
                             nonce=lambda: RFC_SERVER_NONCE)
        self.assertEqual(server.first(RFC_CLIENT_FIRST), RFC_SERVER_FIRST)
        result = server.final(RFC_CLIENT_FINAL)
        self.assertEqual(result.username, "user")
        self.assertEqual(result.server_final, RFC_SERVER_FINAL)

    def test_credential_derivation(self) -> None:
        salted = hashlib.pbkdf2_hmac("sha256", b"pencil", RFC_SALT, 4096)
        cred = rfc_credential()
        self.assertEqual(cred.stored_key, hashlib.sha256(
            hmac.new(salted, b"Client Key", "sha256").digest()).digest())
        self.assertEqual(cred.server_key, hmac.new(salted, b"Server Key", "sha256").digest())
        self.assertTrue(SCRAM_SHA_256.verify_password(cred, "pencil"))
        self.assertFalse(SCRAM_SHA_256.verify_password(cred, "pencil2"))

    def test_wrong_proof(self) -> None:
        server = ScramServer(SCRAM_SHA_256, {"user": rfc_credential()}.get, DECOYS,
                             nonce=lambda: RFC_SERVER_NONCE)
        server.first(RFC_CLIENT_FIRST)
        bad = RFC_CLIENT_FINAL[:-6] + b"AAAAA="
        with self.assertRaises(ScramError):
            server.final(bad)

    def test_unknown_user_fails_only_at_proof(self) -> None:
        server = ScramServer(SCRAM_SHA_256, {}.get, DECOYS)
        client = ScramClient(SCRAM_SHA_256, "nobody", "pw")
        first = server.first(client.first())
        self.assertIn(b",s=", first)
        self.assertIn(b",i=4096", first)
        with self.assertRaises(ScramError) as e:
            server.final(client.final(first))
        self.assertIn("authentication failed", str(e.exception))

    def test_sha512_round_trip_and_escaped_name(self) -> None:
        cred = SCRAM_SHA_512.credential("s3cret")
        server = ScramServer(SCRAM_SHA_512, {"a,b=c": cred}.get, DECOYS)
        client = ScramClient(SCRAM_SHA_512, "a,b=c", "s3cret")
        result = server.final(client.final(server.first(client.first())))
        self.assertEqual(result.username, "a,b=c")
        self.assertEqual(result.server_final,
                         b"v=" + base64.b64encode(client.server_signature))

    def test_malformed_messages(self) -> None:
        for msg in (b"", b"n,,", b"p=tls-unique,,n=user,r=abc", b"x,,n=user,r=abc",
                    b"n,,r=abc,n=user", b"n,,n=,r=abc", b"n,,n=us=er,r=abc",
                    b"n,,m=ext,n=user,r=abc", b"n,a=other,n=user,r=abc",
                    b"n,,n=user,r=abc,tokenauth=true", b"\xff\xfe", b"n,,n=u,r=" + b"x" * 2000):
            server = ScramServer(SCRAM_SHA_256, {"user": rfc_credential()}.get, DECOYS)
            with self.assertRaises(ScramError, msg=repr(msg)):
                server.first(msg)

    def test_nonce_and_binding_must_match(self) -> None:
        for final in (b"c=biws,r=other,p=AAAA", b"c=eSws,r=rOprNGfwEbeRWgbNEkqO"
                      b"%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA", b"c=biws", b"r=x,c=biws,p=AA=="):
            server = ScramServer(SCRAM_SHA_256, {"user": rfc_credential()}.get, DECOYS,
                                 nonce=lambda: RFC_SERVER_NONCE)
            server.first(RFC_CLIENT_FIRST)
            with self.assertRaises(ScramError, msg=repr(final)):
                server.final(final)

    def test_one_attempt_only(self) -> None:
        server = ScramServer(SCRAM_SHA_256, {"user": rfc_credential()}.get, DECOYS,
                             nonce=lambda: RFC_SERVER_NONCE)
        with self.assertRaises(ScramError):
            server.final(RFC_CLIENT_FINAL)
        server.first(RFC_CLIENT_FIRST)
        with self.assertRaises(ScramError):
            server.first(RFC_CLIENT_FIRST)
        server.final(RFC_CLIENT_FINAL)
        with self.assertRaises(ScramError):
            server.final(RFC_CLIENT_FINAL)

    def test_iteration_bounds(self) -> None:
        with self.assertRaises(ValueError):
            SCRAM_SHA_256.credential("x", iterations=4095)
        with self.assertRaises(ValueError):
            SCRAM_SHA_256.credential("x", iterations=16385)


class SessionTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.store = Store()
        self.store.add("alice", "wonderland")
        self.throttle = AuthThrottle(self.clock.seconds)
        self.config = SaslConfig(("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
                                 self.store, self.throttle, DECOYS)

    def session(self, tls: bool = False, peer: str = "10.0.0.1") -> SaslSession:
        return SaslSession(self.config, tls=tls, peer=peer)

    def scram_login(self, s: SaslSession, mech: ScramMechanism, password: str) -> None:
        self.assertEqual(s.handshake(mech.name, 1).code, SaslCode.NONE)
        client = ScramClient(mech, "alice", password)
        first = s.token(client.first())
        s.token(client.final(first))

    def test_scram_success(self) -> None:
        for mech in (SCRAM_SHA_256, SCRAM_SHA_512):
            s = self.session()
            self.scram_login(s, mech, "wonderland")
            self.assertTrue(s.authenticated)
            self.assertEqual(s.principal, "User:alice")
            self.assertFalse(s.raw_tokens)

    def test_scram_wrong_password(self) -> None:
        s = self.session()
        with self.assertRaises(SaslFailed) as e:
            self.scram_login(s, SCRAM_SHA_256, "guess")
        self.assertEqual(e.exception.code, SaslCode.SASL_AUTHENTICATION_FAILED)
        self.assertIsNone(s.principal)
        with self.assertRaises(SaslFailed) as e2:
            s.token(b"anything")
        self.assertEqual(e2.exception.code, SaslCode.ILLEGAL_SASL_STATE)

    def test_plain_only_over_tls(self) -> None:
        s = self.session(tls=False)
        self.assertNotIn("PLAIN", s.available)
        result = s.handshake("PLAIN", 1)
        self.assertEqual(result.code, SaslCode.UNSUPPORTED_SASL_MECHANISM)
        self.assertEqual(result.mechanisms, ("SCRAM-SHA-256", "SCRAM-SHA-512"))
        t = self.session(tls=True)
        self.assertEqual(t.handshake("PLAIN", 0).code, SaslCode.NONE)
        self.assertTrue(t.raw_tokens)
        self.assertEqual(t.token(b"\x00alice\x00wonderland"), b"")
        self.assertEqual(t.principal, "User:alice")

    def test_plain_failures(self) -> None:
        for token in (b"\x00alice\x00nope", b"\x00bob\x00wonderland", b"alice\x00wonderland",
                      b"bob\x00alice\x00wonderland", b"\x00\x00pw", b"\x00alice\x00"):
            s = self.session(tls=True, peer=repr(token))
            s.handshake("PLAIN", 1)
            with self.assertRaises(SaslFailed, msg=repr(token)):
                s.token(token)
        ok = self.session(tls=True)
        ok.handshake("PLAIN", 1)
        ok.token(b"alice\x00alice\x00wonderland")
        self.assertEqual(ok.principal, "User:alice")

    def test_unsupported_mechanism_and_order(self) -> None:
        s = self.session()
        self.assertEqual(s.handshake("GSSAPI", 1).code, SaslCode.UNSUPPORTED_SASL_MECHANISM)
        s = self.session()
        with self.assertRaises(SaslFailed) as e:
            s.token(b"n,,n=alice,r=x")
        self.assertEqual(e.exception.code, SaslCode.ILLEGAL_SASL_STATE)
        s = self.session()
        s.handshake("SCRAM-SHA-256", 1)
        self.assertEqual(s.handshake("SCRAM-SHA-256", 1).code, SaslCode.ILLEGAL_SASL_STATE)

    def test_failures_are_delayed_per_address_and_user_never_refused(self) -> None:
        delays = []
        for _ in range(8):
            with self.assertRaises(SaslFailed) as e:
                self.scram_login(self.session(), SCRAM_SHA_256, "guess")
            delays.append(e.exception.delay)
            self.clock.advance(e.exception.delay)  # a client that waits for the answer
        # Doubling from Kafka's 100 ms, capped.
        self.assertEqual(delays, [0.1, 0.2, 0.4, 0.8, 1.6, MAX_DELAY, MAX_DELAY, MAX_DELAY])
        # The right password from the same address is accepted, at once once the last
        # failure's answer was given...
        s = self.session()
        self.scram_login(s, SCRAM_SHA_256, "wonderland")
        self.assertTrue(s.authenticated)
        self.assertEqual(s.answer_delay, 0)
        # ...and the success forgets the pair's failures.
        with self.assertRaises(SaslFailed) as e:
            self.scram_login(self.session(), SCRAM_SHA_256, "guess")
        self.assertEqual(e.exception.delay, DEFAULT_DELAY)

    def test_an_attempt_during_the_backoff_is_held_right_or_wrong(self) -> None:
        for _ in range(3):
            with self.assertRaises(SaslFailed) as e:
                self.scram_login(self.session(), SCRAM_SHA_256, "guess")
        self.assertAlmostEqual(e.exception.delay, 0.4)
        # Not waiting for the failure answer tells a guesser nothing sooner: the next
        # attempt of the pair is answered when the backoff ends, even when right...
        self.clock.advance(0.1)
        s = self.session()
        self.scram_login(s, SCRAM_SHA_256, "wonderland")
        self.assertTrue(s.authenticated)
        self.assertAlmostEqual(s.answer_delay, 0.3)
        # ...while another user, or the same user from another address, is not held.
        self.store.add("bob", "builder")
        bob = self.session()
        self.assertEqual(bob.handshake("SCRAM-SHA-256", 1).code, SaslCode.NONE)
        client = ScramClient(SCRAM_SHA_256, "bob", "builder")
        bob.token(client.final(bob.token(client.first())))
        self.assertEqual((bob.authenticated, bob.answer_delay), (True, 0))

    def test_a_held_wrong_attempt_waits_for_the_backoff_and_its_own_delay(self) -> None:
        for _ in range(2):
            with self.assertRaises(SaslFailed):
                self.scram_login(self.session(), SCRAM_SHA_256, "guess")
        # The pair is held 0.2 s; a third failure now waits the larger of that and
        # its own 0.4 s.
        with self.assertRaises(SaslFailed) as e:
            self.scram_login(self.session(), SCRAM_SHA_256, "guess")
        self.assertAlmostEqual(e.exception.delay, 0.4)

    def test_plain_failures_throttle_the_named_user(self) -> None:
        s = self.session(tls=True)
        s.handshake("PLAIN", 1)
        with self.assertRaises(SaslFailed):
            s.token(b"\x00alice\x00nope")
        self.assertEqual(self.throttle.failures("10.0.0.1", "alice"), 1)
        refused = self.session()
        self.assertEqual(refused.handshake("GSSAPI", 1).delay, DEFAULT_DELAY)
        self.assertEqual(self.throttle.failures("10.0.0.1", ""), 1)

    def test_oversized_token(self) -> None:
        s = self.session()
        s.handshake("SCRAM-SHA-256", 1)
        with self.assertRaises(SaslFailed):
            s.token(b"n,,n=alice,r=" + b"x" * 5000)

    def test_parse_mechanisms(self) -> None:
        self.assertEqual(parse_mechanisms("scram-sha-256, PLAIN,SCRAM-SHA-256"),
                         ("SCRAM-SHA-256", "PLAIN"))
        for bad in ("", " , ", "GSSAPI", "PLAIN,OAUTHBEARER"):
            with self.assertRaises(ValueError):
                parse_mechanisms(bad)


class LibrdkafkaNonceTests(SynchronousTestCase):
    """librdkafka < 2.6.1 repeats its nonce in client-final: accepted in exactly that form."""

    def exchange(self, echo: str) -> None:
        cred = SCRAM_SHA_256.credential("pw")
        server = ScramServer(SCRAM_SHA_256, {"u": cred}.get, DECOYS, nonce=lambda: "SRV")
        client = ScramClient(SCRAM_SHA_256, "u", "pw", nonce="CLI")
        first = server.first(client.first())
        self.assertTrue(first.startswith(b"r=CLISRV,"))
        server.final(client.final(first, echo_nonce=echo))

    def test_doubled_client_nonce_accepted(self) -> None:
        self.exchange("CLICLISRV")

    def test_other_forms_refused(self) -> None:
        for bad in ("CLI", "SRV", "XCLISRV", "CLICLICLISRV"):
            with self.assertRaises(ScramError, msg=bad):
                self.exchange(bad)
