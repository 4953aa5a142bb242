"""The credentials file (parse, reload on change, atomic rewrite) and the ``--sasl`` /
``--credentials`` options of ``twistd broker``."""

from __future__ import annotations

import json
import os
import stat

from twisted.internet.task import Clock
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from brokerd.security.credentials import (
    CHECK_INTERVAL,
    CredentialChange,
    CredentialsError,
    CredentialStore,
    parse,
    serialize,
)
from brokerd.security.scram import SCRAM_SHA_256, SCRAM_SHA_512
from brokerd.tap import Options

from tests.kafka.server.test_sasl_session import temp_path


class StoreTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.path = temp_path(self)
        self.clock = Clock()
        self.errors: list[str] = []

    def open(self, create: bool = True) -> CredentialStore:
        return CredentialStore.open(self.path, clock=self.clock.seconds,
                                    on_error=self.errors.append, create=create)

    def test_missing_file(self) -> None:
        with self.assertRaises(CredentialsError):
            self.open(create=False)
        store = self.open()
        self.assertEqual(store.users(), {})
        self.assertFalse(os.path.exists(self.path))

    def test_round_trip_and_mode(self) -> None:
        store = self.open()
        cred = SCRAM_SHA_256.credential("pw")
        store.alter([CredentialChange("alice", "SCRAM-SHA-256", cred)])
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        again = self.open(create=False)
        self.assertEqual(again.lookup("alice", "SCRAM-SHA-256"), cred)
        self.assertIsNone(again.lookup("alice", "SCRAM-SHA-512"))

    def test_reload_on_change_rate_limited(self) -> None:
        store = self.open()
        writer = self.open()
        writer.alter([CredentialChange("bob", "SCRAM-SHA-512", SCRAM_SHA_512.credential("x"))])
        self.clock.advance(CHECK_INTERVAL / 2)
        self.assertIsNone(store.lookup("bob", "SCRAM-SHA-512"))  # not stat'ed yet
        self.clock.advance(CHECK_INTERVAL)
        self.assertIsNotNone(store.lookup("bob", "SCRAM-SHA-512"))
        writer.alter([CredentialChange("bob", "SCRAM-SHA-512", None)])
        self.clock.advance(CHECK_INTERVAL)
        self.assertIsNone(store.lookup("bob", "SCRAM-SHA-512"))
        self.assertEqual(store.users(), {})

    def test_bad_file_keeps_last_good(self) -> None:
        store = self.open()
        cred = SCRAM_SHA_256.credential("pw")
        store.alter([CredentialChange("alice", "SCRAM-SHA-256", cred)])
        with open(self.path, "w") as f:
            f.write("{not json")
        self.clock.advance(CHECK_INTERVAL)
        self.assertEqual(store.lookup("alice", "SCRAM-SHA-256"), cred)
        self.assertEqual(len(self.errors), 1)
        self.assertIn("not valid JSON", self.errors[0])
        # Not reported again until the file changes again.
        self.clock.advance(CHECK_INTERVAL)
        store.lookup("alice", "SCRAM-SHA-256")
        self.assertEqual(len(self.errors), 1)
        # alter() refuses to overwrite a file it cannot read (nothing is lost).
        with self.assertRaises(CredentialsError):
            store.alter([CredentialChange("bob", "SCRAM-SHA-256", cred)])

    def test_parse_refusals(self) -> None:
        good = json.loads(serialize({"a": {"SCRAM-SHA-256": SCRAM_SHA_256.credential("p")}}))
        parse(json.dumps(good).encode())
        entry = good["users"]["a"]["SCRAM-SHA-256"]
        bad_docs = [
            b"[]", b'{"format": 2}', b'{"format": 1, "users": []}',
            json.dumps({"format": 1, "users": {"": {}}}).encode(),
            json.dumps({"format": 1, "users": {"a": {"MD5": entry}}}).encode(),
            json.dumps({"format": 1, "users": {"a": {"SCRAM-SHA-512": entry}}}).encode(),
            json.dumps({"format": 1, "users": {"a": {"SCRAM-SHA-256": {
                **entry, "iterations": 10}}}}).encode(),
            json.dumps({"format": 1, "users": {"a": {"SCRAM-SHA-256": {
                **entry, "salt": "!!"}}}}).encode(),
            json.dumps({"format": 1, "users": {"a": {"SCRAM-SHA-256": {
                **entry, "stored_key": "A" * 5000}}}}).encode(),
            b"\xff",
        ]
        for doc in bad_docs:
            with self.assertRaises(CredentialsError, msg=doc[:80]):
                parse(doc)


class OptionsTests(SynchronousTestCase):
    def parse(self, *argv: str) -> Options:
        options = Options()
        options.parseOptions(list(argv))
        return options

    def test_sasl_needs_credentials(self) -> None:
        with self.assertRaises(usage.UsageError) as e:
            self.parse("--sasl", "SCRAM-SHA-256")
        self.assertIn("--credentials", str(e.exception))

    def test_unknown_mechanism(self) -> None:
        path = temp_path(self)
        CredentialStore.open(path, create=True).alter([])
        with self.assertRaises(usage.UsageError) as e:
            self.parse("--sasl", "SCRAM-SHA-256,GSSAPI", "--credentials", path)
        self.assertIn("GSSAPI", str(e.exception))

    def test_bad_credentials_file(self) -> None:
        with self.assertRaises(usage.UsageError):
            self.parse("--sasl", "PLAIN", "--credentials", temp_path(self))
        path = temp_path(self)
        with open(path, "w") as f:
            f.write("nope")
        with self.assertRaises(usage.UsageError):
            self.parse("--credentials", path)

    def test_accepted(self) -> None:
        path = temp_path(self)
        CredentialStore.open(path, create=True).alter([])
        options = self.parse(
            "--sasl", "scram-sha-512,PLAIN", "--credentials", path, "--native", "none"
        )
        self.assertEqual(options.settings.sasl.mechanisms, ("SCRAM-SHA-512", "PLAIN"))
        self.assertIsNotNone(options.settings.sasl.credentials)
        self.assertIsNone(self.parse().settings.sasl.mechanisms)
