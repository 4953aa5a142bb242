# -*- test-case-name: tests.security.test_credentials -*-
"""The SCRAM credentials file of ``--credentials``: read, watched for changes, rewritten.

The file is JSON::

    {"format": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "iterations": 4096,
                                           "stored_key": "<base64>",
                                           "server_key": "<base64>"}}}}

It holds salted hashes only (salt, iteration count, StoredKey, ServerKey): never a
password, nor the salted password. SASL/PLAIN logins are checked against these hashes.

What :class:`CredentialStore` does: loads and validates the whole file (every size and
count is bounded before use), looks a user's credential up, and notices a change of the
file (its inode, size or modification time, checked with one ``stat`` at most every
:data:`CHECK_INTERVAL` seconds on lookup) and reloads it, so ``brokerctl users`` and the
Kafka AlterUserScramCredentials API take effect without a restart. A file that turns
bad keeps the last good contents in use (and the error is reported through
``on_error``). :meth:`CredentialStore.alter` rewrites the file atomically (temporary
file, fsync, rename, fsync of the directory), after re-reading it, so a change made by
someone else in between is kept.

What it does not do: lock out a concurrent writer (two writers at the same instant: the
last rename wins), hash passwords (:mod:`brokerd.security.scram` does), or import Twisted.
Its file I/O is blocking and small.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping

import attrs

from brokerd.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MAX_USERNAME_BYTES,
    MECHANISMS,
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
)
from brokerd.storage.fileio import atomic_write, read_file

#: Version of the file layout written.
FORMAT = 1
#: Largest credentials file read (about 40,000 users with two mechanisms each).
MAX_FILE_BYTES = 16 * 1024 * 1024
#: Longest salt, and longest key, in bytes.
MAX_SALT_BYTES = 1024
MAX_KEY_BYTES = 64
#: How often (seconds) a lookup may stat the file to notice a change.
CHECK_INTERVAL = 1.0

__all__ = [
    "CHECK_INTERVAL",
    "FORMAT",
    "MAX_FILE_BYTES",
    "CredentialChange",
    "CredentialStore",
    "CredentialsError",
    "Users",
    "check_username",
    "parse",
    "serialize",
]

#: The order in which a password is checked against a user's stored hashes.
_STRONGEST_FIRST = (SCRAM_SHA_512, SCRAM_SHA_256)
#: User name -> mechanism name -> credential.
Users = dict[str, dict[str, ScramCredential]]


class CredentialsError(ValueError):
    """The credentials file cannot be read or does not hold valid credentials."""


def check_username(name: str) -> None:
    """Refuse an empty or overlong user name (Kafka refuses an empty one)."""
    if not name:
        raise CredentialsError("the user name is empty")
    if len(name.encode("utf-8")) > MAX_USERNAME_BYTES:
        raise CredentialsError(f"the user name is longer than {MAX_USERNAME_BYTES} bytes")


def _b64(value: object, what: str, limit: int) -> bytes:
    if not isinstance(value, str) or len(value) > (limit * 4) // 3 + 4:
        raise CredentialsError(f"{what} must be a base64 string of at most {limit} bytes")
    try:
        data = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise CredentialsError(f"{what} is not valid base64") from None
    if not data:
        raise CredentialsError(f"{what} is empty")
    return data


def _credential(raw: object, where: str, digest_size: int) -> ScramCredential:
    if not isinstance(raw, dict):
        raise CredentialsError(f"{where} must be an object")
    iterations = raw.get("iterations")
    if not isinstance(iterations, int) or isinstance(iterations, bool) or not (
        MIN_ITERATIONS <= iterations <= MAX_ITERATIONS
    ):
        raise CredentialsError(
            f"{where}: iterations must be an integer from {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
    stored = _b64(raw.get("stored_key"), f"{where}: stored_key", MAX_KEY_BYTES)
    server = _b64(raw.get("server_key"), f"{where}: server_key", MAX_KEY_BYTES)
    if len(stored) != digest_size or len(server) != digest_size:
        raise CredentialsError(f"{where}: keys must be {digest_size} bytes")
    return ScramCredential(
        salt=_b64(raw.get("salt"), f"{where}: salt", MAX_SALT_BYTES),
        iterations=iterations,
        stored_key=stored,
        server_key=server,
    )


def parse(data: bytes) -> Users:
    """Validate and parse a credentials file's content.

    :raises CredentialsError: too large, not JSON, or any entry invalid.
    """
    if len(data) > MAX_FILE_BYTES:
        raise CredentialsError(f"credentials file is larger than {MAX_FILE_BYTES} bytes")
    try:
        doc = json.loads(data.decode("utf-8")) if data.strip() else {"format": FORMAT}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CredentialsError(f"credentials file is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CredentialsError(f"credentials file must be an object with \"format\": {FORMAT}")
    raw_users = doc.get("users", {})
    if not isinstance(raw_users, dict):
        raise CredentialsError("\"users\" must be an object")
    users: Users = {}
    for name, mechs in raw_users.items():
        check_username(name)
        if not isinstance(mechs, dict):
            raise CredentialsError(f"user {name!r} must map mechanism names to credentials")
        entry: dict[str, ScramCredential] = {}
        for mech_name, raw in mechs.items():
            mech = MECHANISMS.get(mech_name)
            if mech is None:
                raise CredentialsError(
                    f"user {name!r}: unknown mechanism {mech_name!r} "
                    f"(known: {', '.join(MECHANISMS)})"
                )
            entry[mech_name] = _credential(raw, f"user {name!r} {mech_name}", mech.digest_size)
        users[name] = entry
    return users


def serialize(users: Mapping[str, Mapping[str, ScramCredential]]) -> bytes:
    """The file content for ``users`` (sorted, so rewrites are stable)."""

    def enc(b: bytes) -> str:
        return base64.b64encode(b).decode("ascii")

    doc = {
        "format": FORMAT,
        "users": {
            name: {
                mech: {
                    "salt": enc(c.salt),
                    "iterations": c.iterations,
                    "stored_key": enc(c.stored_key),
                    "server_key": enc(c.server_key),
                }
                for mech, c in sorted(mechs.items())
            }
            for name, mechs in sorted(users.items())
        },
    }
    return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


@attrs.frozen
class CredentialChange:
    """One change for :meth:`CredentialStore.alter`: set (``credential``) or delete
    (``credential`` None) one user's credential for one mechanism."""

    user: str
    mechanism: str
    credential: ScramCredential | None


_Signature = tuple[int, int, int]


def _signature(path: str) -> _Signature | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class CredentialStore:
    """The credentials of ``path``, reloaded when the file changes.

    :param path: the JSON file.
    :param clock: monotonic seconds (tests inject a fake one); rate-limits the stat.
    :param on_error: told (with a message) when a changed file cannot be loaded.
    :raises CredentialsError: from :meth:`open` when the file is missing or invalid.
    """

    def __init__(
        self,
        path: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self._clock = clock
        self._on_error = on_error
        self._users: Users = {}
        self._signature: _Signature | None = None
        self._checked_at: float | None = None

    @classmethod
    def open(
        cls,
        path: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[str], None] | None = None,
        create: bool = False,
    ) -> CredentialStore:
        """A store of ``path``, loaded now. A missing file is an error unless
        ``create`` (then it starts empty and is written on the first change)."""
        store = cls(path, clock=clock, on_error=on_error)
        if _signature(path) is None and not create:
            raise CredentialsError(f"credentials file {path} does not exist")
        store._users, store._signature = store._read()
        store._checked_at = clock()
        return store

    def _read(self) -> tuple[Users, _Signature | None]:
        before = _signature(self.path)
        try:
            data = read_file(self.path)
        except OSError as e:
            raise CredentialsError(f"cannot read {self.path}: {e.strerror or e}") from None
        users = {} if data is None else parse(data)
        return users, before

    def refresh(self, *, force: bool = False) -> None:
        """Reload the file if it changed (stat at most every :data:`CHECK_INTERVAL`)."""
        now = self._clock()
        if not force and self._checked_at is not None and (
            now - self._checked_at < CHECK_INTERVAL
        ):
            return
        self._checked_at = now
        signature = _signature(self.path)
        if signature == self._signature:
            return
        try:
            self._users, self._signature = self._read()
        except CredentialsError as e:
            # Keep the last good credentials; do not retry until the file changes again.
            self._signature = signature
            if self._on_error is not None:
                self._on_error(f"credentials file {self.path} not reloaded: {e}")

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        """``user``'s credential for ``mechanism`` (a SCRAM name), or None."""
        self.refresh()
        return self._users.get(user, {}).get(mechanism)

    def verify_password(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s, checked against the strongest SCRAM hash
        stored for the user (what a PLAIN login checks). An unknown user costs the same
        work as a known one, so the time taken does not tell which names exist."""
        for mechanism in _STRONGEST_FIRST:
            credential = self.lookup(user, mechanism.name)
            if credential is not None:
                return mechanism.verify_password(credential, password)
        decoy = ScramCredential(os.urandom(16), DEFAULT_ITERATIONS, b"", b"")
        SCRAM_SHA_256.verify_password(decoy, password)
        return False

    def credentials_of(self, user: str) -> Mapping[str, ScramCredential]:
        """Every credential of ``user`` by mechanism (empty if unknown)."""
        self.refresh()
        return dict(self._users.get(user, {}))

    def users(self) -> Mapping[str, Mapping[str, ScramCredential]]:
        """Every user's credentials (a copy)."""
        self.refresh()
        return {name: dict(mechs) for name, mechs in self._users.items()}

    def alter(self, changes: Iterable[CredentialChange]) -> None:
        """Apply ``changes`` to the file's current content and rewrite it atomically.

        :raises CredentialsError: the current file is invalid (nothing is written).
        :raises OSError: the write failed (the old file is intact).
        """
        users, _ = self._read()
        for change in changes:
            check_username(change.user)
            if change.credential is None:
                mechs = users.get(change.user, {})
                mechs.pop(change.mechanism, None)
                if not mechs:
                    users.pop(change.user, None)
            else:
                users.setdefault(change.user, {})[change.mechanism] = change.credential
        atomic_write(self.path, serialize(users))
        self._users, self._signature = users, _signature(self.path)
        self._checked_at = self._clock()
