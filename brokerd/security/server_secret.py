# -*- test-case-name: tests.security.test_scram_decoys -*-
"""The broker's own secret: random bytes made once and kept in the data directory.

SCRAM answers a user name that does not exist with a salt derived from this secret and
the name (:class:`brokerd.security.scram.DecoyCredentials`), so the answer is the same on
every attempt, as it is for a real user. It must therefore outlive a restart: it is
read from ``<data-dir>/scram.secret`` (hex, mode 0600), and written there (atomically)
the first time. Anyone who reads it can tell made-up salts from real ones, so it is
kept as private as the logs.

What it does not do: rotate the secret (delete the file with the broker stopped: unknown
names then get other salts, which tells only that the file changed), or import Twisted.
"""

from __future__ import annotations

import binascii
import os

from brokerd.storage.fileio import atomic_write, read_file

#: The file in the data directory.
SECRET_FILE_NAME = "scram.secret"
#: Random bytes of a new secret.
SECRET_BYTES = 32

__all__ = ["SECRET_BYTES", "SECRET_FILE_NAME", "ServerSecretError", "load_or_create"]


class ServerSecretError(ValueError):
    """The secret file exists but does not hold a secret."""


def load_or_create(directory: str) -> bytes:
    """The secret of ``directory``, made and stored first if there is none.

    :raises ServerSecretError: the file holds something else (it is never overwritten:
        a secret that changes would make unknown names recognisable).
    :raises OSError: it cannot be read or written.
    """
    path = os.path.join(directory, SECRET_FILE_NAME)
    data = read_file(path)
    if data is None:
        secret = os.urandom(SECRET_BYTES)
        atomic_write(path, secret.hex().encode("ascii") + b"\n")
        return secret
    if len(data) > 1024:
        raise ServerSecretError(f"{path} is too long for a secret")
    try:
        secret = binascii.unhexlify(data.strip())
    except (binascii.Error, ValueError):
        raise ServerSecretError(f"{path} does not hold a hex secret") from None
    if len(secret) < 16:
        raise ServerSecretError(f"{path} holds {len(secret)} bytes; at least 16 are needed")
    return secret
