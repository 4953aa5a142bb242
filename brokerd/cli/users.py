# -*- test-case-name: tests.cli.test_users -*-
"""``brokerctl users``: manage the SCRAM credentials file of ``twistd broker --credentials``.

Commands::

    brokerctl users add NAME --credentials FILE [--mechanism M ...] [--iterations N]
        (password read from stdin: its first line, without the line break)
    brokerctl users delete NAME --credentials FILE [--mechanism M]
    brokerctl users list --credentials FILE

``add`` stores salted hashes only (a random salt per mechanism); with no
``--mechanism`` it stores both SCRAM-SHA-256 and SCRAM-SHA-512, which also serves
SASL/PLAIN. The file is rewritten atomically and a running broker picks the change up
within a second, without a restart. These commands work on the file directly; they
do not talk to a broker (the Kafka AlterUserScramCredentials API does that).

Exit status: 0 success, 1 the file could not be read or written or the user does not
exist, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from brokerd.security.credentials import CredentialChange, CredentialsError, CredentialStore
from brokerd.security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS

#: Longest password read from stdin, in characters.
MAX_PASSWORD_CHARS = 1024

EXIT_ERROR = 1
EXIT_USAGE = 2

__all__ = ["add_users_parser", "run_users"]


def add_users_parser(sub: Any) -> None:
    """Register ``users`` on ``brokerctl``'s subcommand parser."""
    users = sub.add_parser("users", help="manage the SCRAM credentials file (--credentials)")
    cmds = users.add_subparsers(dest="users_command", required=True)
    add = cmds.add_parser("add", help="add a user or change a password (password on stdin)")
    add.add_argument("name")
    add.add_argument(
        "--mechanism", action="append", choices=sorted(MECHANISMS),
        help="SCRAM mechanism to store (repeatable; default: both)",
    )
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help=f"PBKDF2 iterations ({MIN_ITERATIONS}-{MAX_ITERATIONS}, "
                     f"default {DEFAULT_ITERATIONS})")
    delete = cmds.add_parser("delete", help="remove a user (or one of its mechanisms)")
    delete.add_argument("name")
    delete.add_argument("--mechanism", action="append", choices=sorted(MECHANISMS))
    list_ = cmds.add_parser("list", help="list users, mechanisms and iterations")
    for p in (add, delete, list_):
        p.add_argument("--credentials", required=True, metavar="FILE",
                       help="the broker's --credentials file (created by add if missing)")


def run_users(args: argparse.Namespace, stdin: TextIO | None = None,
              stdout: TextIO | None = None) -> int:
    """Carry out a parsed ``users`` command."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    try:
        store = CredentialStore.open(args.credentials, create=args.users_command == "add")
        if args.users_command == "add":
            return _add(store, args, stdin, stdout)
        if args.users_command == "delete":
            return _delete(store, args, stdout)
        for name, mechs in sorted(store.users().items()):
            for mech, cred in sorted(mechs.items()):
                print(f"{name}\t{mech}\titerations={cred.iterations}", file=stdout)
        return 0
    except CredentialsError as e:
        print(f"brokerctl: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:
        print(f"brokerctl: cannot write {args.credentials}: {e}", file=sys.stderr)
        return EXIT_ERROR


def _add(store: CredentialStore, args: argparse.Namespace, stdin: TextIO,
         stdout: TextIO) -> int:
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        print(f"brokerctl: error: --iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}",
              file=sys.stderr)
        return EXIT_USAGE
    line = stdin.readline(MAX_PASSWORD_CHARS + 2)
    password = line.rstrip("\r\n")
    if not password:
        print("brokerctl: error: no password on stdin", file=sys.stderr)
        return EXIT_USAGE
    if len(password) > MAX_PASSWORD_CHARS:
        print(f"brokerctl: error: password longer than {MAX_PASSWORD_CHARS} characters",
              file=sys.stderr)
        return EXIT_USAGE
    mechanisms = args.mechanism or sorted(MECHANISMS)
    store.alter(
        CredentialChange(
            args.name, name,
            MECHANISMS[name].credential(password, iterations=args.iterations),
        )
        for name in dict.fromkeys(mechanisms)
    )
    print(f"stored {', '.join(dict.fromkeys(mechanisms))} credentials for {args.name}",
          file=stdout)
    return 0


def _delete(store: CredentialStore, args: argparse.Namespace, stdout: TextIO) -> int:
    have = store.credentials_of(args.name)
    mechanisms = [m for m in (args.mechanism or sorted(have)) if m in have]
    if not mechanisms:
        print(f"brokerctl: error: no such user or mechanism: {args.name}", file=sys.stderr)
        return EXIT_ERROR
    store.alter(CredentialChange(args.name, m, None) for m in mechanisms)
    print(f"deleted {', '.join(mechanisms)} credentials of {args.name}", file=stdout)
    return 0
