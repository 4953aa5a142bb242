"""brokerd.cli.users: ``brokerctl users add|delete|list`` on a credentials file (salted
hashes stored, exit codes for refusals, the command line end to end)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from brokerd.cli import brokerctl as cli
from brokerd.security.credentials import CredentialStore
from brokerd.security.scram import SCRAM_SHA_256

from tests.kafka.server.test_sasl_session import temp_path


def run_cli(*argv: str, stdin: str = "") -> tuple[int, str]:
    args = cli._parser().parse_args(argv)
    out = io.StringIO()
    from brokerd.cli.users import run_users

    return run_users(args, stdin=io.StringIO(stdin), stdout=out), out.getvalue()


class BrokerctlUsersTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.path = temp_path(self)

    def test_add_list_delete(self) -> None:
        code, out = run_cli("users", "add", "alice", "--credentials", self.path,
                            "--mechanism", "SCRAM-SHA-256", stdin="s3cret\n")
        self.assertEqual(code, 0, out)
        store = CredentialStore.open(self.path)
        cred = store.lookup("alice", "SCRAM-SHA-256")
        assert cred is not None
        self.assertTrue(SCRAM_SHA_256.verify_password(cred, "s3cret"))
        self.assertIsNone(store.lookup("alice", "SCRAM-SHA-512"))
        run_cli("users", "add", "bob", "--credentials", self.path, "--iterations", "8192",
                stdin="pw\n")
        code, out = run_cli("users", "list", "--credentials", self.path)
        self.assertEqual(out.splitlines(), [
            "alice\tSCRAM-SHA-256\titerations=4096",
            "bob\tSCRAM-SHA-256\titerations=8192",
            "bob\tSCRAM-SHA-512\titerations=8192",
        ])
        self.assertEqual(run_cli("users", "delete", "bob", "--credentials", self.path,
                                 "--mechanism", "SCRAM-SHA-512")[0], 0)
        self.assertEqual(run_cli("users", "delete", "alice", "--credentials", self.path)[0], 0)
        self.assertEqual(run_cli("users", "delete", "alice", "--credentials", self.path)[0], 1)
        self.assertEqual(run_cli("users", "list", "--credentials", self.path)[1],
                         "bob\tSCRAM-SHA-256\titerations=8192\n")

    def test_refusals(self) -> None:
        self.assertEqual(run_cli("users", "add", "a", "--credentials", self.path,
                                 stdin="")[0], 2)
        self.assertEqual(run_cli("users", "add", "a", "--credentials", self.path,
                                 "--iterations", "100", stdin="pw\n")[0], 2)
        self.assertEqual(run_cli("users", "list", "--credentials", self.path)[0], 1)
        self.assertFalse(os.path.exists(self.path))

    def test_command_line(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "brokerd.cli", "users", "add", "carol",
             "--credentials", self.path], input=b"pw\n", capture_output=True, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIsNotNone(CredentialStore.open(self.path).lookup("carol", "SCRAM-SHA-512"))
