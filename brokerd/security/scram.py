# -*- test-case-name: tests.kafka.server.test_sasl_session -*-
"""SCRAM (RFC 5802, with the SHA-256 of RFC 7677 and SHA-512) as a sans-IO server.

What this module does:

* :class:`ScramMechanism` names a hash (SCRAM-SHA-256, SCRAM-SHA-512) and derives the
  stored credential from a password or a salted password:
  ``SaltedPassword = PBKDF2(password, salt, i)``, ``ClientKey = HMAC(SaltedPassword,
  "Client Key")``, ``StoredKey = H(ClientKey)``, ``ServerKey = HMAC(SaltedPassword,
  "Server Key")``. A :class:`ScramCredential` holds salt, iterations, StoredKey and
  ServerKey only: never a password, nor anything that lets one log in directly.
* :class:`ScramServer` is one server-side exchange: :meth:`~ScramServer.first` takes the
  client-first message and returns server-first (the client's nonce plus ours, the salt,
  the iteration count); :meth:`~ScramServer.final` takes client-final, checks the channel
  binding echo, the nonce and the client proof (``H(proof XOR HMAC(StoredKey,
  AuthMessage)) == StoredKey``, compared in constant time) and returns server-final with
  the server signature. Any fault raises :class:`ScramError` with a message fit for the
  client; the exchange is then over.
* An unknown user gets a made-up credential (:class:`DecoyCredentials`): its salt and
  keys are derived from a server secret and the name, so they are the same on every
  attempt, as a real user's are, with the iteration count new credentials get; the
  exchange does the same work for both and fails only at the proof, so neither the
  answer nor its timing tells which user names exist.

What it does not do: I/O, Twisted, looking users up (a callable is injected), channel
binding (a client asking for it is refused: Kafka has none), or SCRAM extensions other
than ignoring unknown ones (a delegation-token login, ``tokenauth=true``, is refused).
One deviation from RFC 5802, for librdkafka before 2.6.1: client-final may carry the
client's nonce followed by the full nonce (see :meth:`ScramServer.final`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable

import attrs

#: Kafka's bounds on the iteration count of a SCRAM credential.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
#: Default iteration count of new credentials (Kafka's and RFC 7677's minimum).
DEFAULT_ITERATIONS = 4096
#: Longest SCRAM message accepted from a client (real ones are about 100-200 bytes).
MAX_MESSAGE_BYTES = 1024
#: Longest user name, in bytes of UTF-8.
MAX_USERNAME_BYTES = 256
#: Random bytes of a generated salt, and of the server's nonce part (before base64).
SALT_BYTES = 32
NONCE_BYTES = 24


class ScramError(Exception):
    """A SCRAM exchange failed; ``str()`` is the message for the client."""


@attrs.frozen
class ScramCredential:
    """What the server keeps for one user and mechanism."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


@attrs.frozen
class ScramMechanism:
    """A SCRAM variant: its SASL name, hash and Kafka's int8 code for it."""

    name: str
    hash_name: str
    #: Kafka's ScramMechanism code in Describe/AlterUserScramCredentials.
    code: int

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        # RFC 5802 wants SASLprep; Kafka's clients and server apply none, so neither do we
        # (a non-ASCII password then works the same on both sides).
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def credential_from_salted(
        self, salted_password: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(
            salt=salt,
            iterations=iterations,
            stored_key=self.h(client_key),
            server_key=self.hmac(salted_password, b"Server Key"),
        )

    def credential(
        self, password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramCredential:
        """A new credential for ``password`` (a random salt unless one is given)."""
        check_iterations(iterations)
        salt = os.urandom(SALT_BYTES) if salt is None else salt
        return self.credential_from_salted(
            self.salted_password(password, salt, iterations), salt, iterations
        )

    def verify_password(self, credential: ScramCredential, password: str) -> bool:
        """Whether ``password`` matches ``credential`` (SASL/PLAIN checks it this way)."""
        salted = self.salted_password(password, credential.salt, credential.iterations)
        stored = self.h(self.hmac(salted, b"Client Key"))
        return hmac.compare_digest(stored, credential.stored_key)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
#: The SCRAM mechanisms by SASL name.
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
#: The SCRAM mechanisms by Kafka's int8 code.
MECHANISMS_BY_CODE: dict[int, ScramMechanism] = {m.code: m for m in MECHANISMS.values()}


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, "
            f"not {iterations}"
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ScramError(f"invalid base64 in {what}") from None


def _decode_message(data: bytes, what: str) -> str:
    if len(data) > MAX_MESSAGE_BYTES:
        raise ScramError(f"{what} of {len(data)} bytes is longer than {MAX_MESSAGE_BYTES}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    """``a=value`` pairs in order; anything else is malformed."""
    out: list[tuple[str, str]] = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"malformed attribute {part[:20]!r} in {what}")
        out.append((part[0], part[2:]))
    return out


def _saslname(value: str) -> str:
    """Undo SCRAM's escaping of ``,`` (``=2C``) and ``=`` (``=3D``) in a user name."""
    out: list[str] = []
    i = 0
    while i < len(value):
        c = value[i]
        if c != "=":
            out.append(c)
            i += 1
            continue
        escape = value[i + 1 : i + 3]
        if escape == "2C":
            out.append(",")
        elif escape == "3D":
            out.append("=")
        else:
            raise ScramError("invalid escape in the user name")
        i += 3
    return "".join(out)


def escape_username(name: str) -> str:
    """SCRAM's escaping of a user name (clients; tests)."""
    return name.replace("=", "=3D").replace(",", "=2C")


class DecoyCredentials:
    """Made-up credentials for user names that do not exist, stable per name.

    :param secret: the server's secret (:mod:`brokerd.security.server_secret`); the
        same secret gives the same salt for a name after a restart.
    """

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the decoy secret must be at least 16 bytes")
        self._secret = secret

    def _derive(self, mechanism: ScramMechanism, what: bytes, username: str) -> bytes:
        # One key per purpose, mechanism and name; the NUL bytes keep the parts apart
        # (a user name cannot hold NUL after SCRAM's escaping rules either way).
        message = b"\x00".join((what, mechanism.name.encode(), username.encode("utf-8")))
        return mechanism.hmac(self._secret, message)

    def credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential:
        """The credential an unknown ``username`` appears to have for ``mechanism``."""
        salt = self._derive(mechanism, b"salt", username)
        return ScramCredential(
            salt=salt[:SALT_BYTES],
            iterations=DEFAULT_ITERATIONS,
            stored_key=self._derive(mechanism, b"stored key", username),
            server_key=self._derive(mechanism, b"server key", username),
        )


def random_nonce() -> str:
    return base64.urlsafe_b64encode(os.urandom(NONCE_BYTES)).decode("ascii").rstrip("=")


@attrs.frozen
class ScramResult:
    """A finished exchange: who logged in, and the server-final message to send."""

    username: str
    server_final: bytes


class ScramServer:
    """One server-side SCRAM exchange (client-first, then client-final).

    :param mechanism: which SCRAM variant.
    :param lookup: the stored credential of a user for this mechanism, or None.
    :param decoys: what an unknown user appears to have.
    :param nonce: makes the server's part of the nonce (tests inject RFC vectors).
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        decoys: DecoyCredentials,
        *,
        nonce: Callable[[], str] = random_nonce,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._decoys = decoys
        self._nonce = nonce
        self._username: str | None = None
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._client_nonce = ""
        self._full_nonce = ""

    @property
    def username(self) -> str | None:
        """The user name of client-first (None before it)."""
        return self._username

    def first(self, client_first: bytes) -> bytes:
        """Answer client-first with server-first.

        :raises ScramError: malformed message, channel binding asked, or called twice.
        """
        if self._username is not None:
            raise ScramError("client-first received twice")
        text = _decode_message(client_first, "client-first message")
        # gs2-header: cbind flag "n" or "y" (client could bind, thinks we cannot), an
        # optional authzid, then the bare message.
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise ScramError("malformed client-first message")
        flag, authzid, bare = parts
        if flag.startswith("p="):
            raise ScramError("channel binding is not supported")
        if flag not in ("n", "y"):
            raise ScramError(f"invalid channel binding flag {flag[:10]!r}")
        if bare.startswith("m="):
            raise ScramError("mandatory SCRAM extensions are not supported")
        attrs_ = _attributes(",".join(bare.split(",")[:2]), "client-first message")
        if len(attrs_) < 2 or attrs_[0][0] != "n" or attrs_[1][0] != "r":
            raise ScramError("client-first must start with n=<user>,r=<nonce>")
        username = _saslname(attrs_[0][1])
        if not username or len(username.encode("utf-8")) > MAX_USERNAME_BYTES:
            raise ScramError("invalid user name")
        if authzid and (not authzid.startswith("a=") or _saslname(authzid[2:]) != username):
            raise ScramError("authorization id must be empty or the user name")
        if ("tokenauth", "true") in _extensions(bare):
            raise ScramError("delegation tokens are not supported")
        client_nonce = attrs_[1][1]
        if not client_nonce or any(c in client_nonce for c in ", "):
            raise ScramError("invalid client nonce")
        stored = self._lookup(username)
        # Made for every name, known or not, so both cost the same; an unknown name goes
        # on with it and fails at the proof, like a wrong password.
        decoy = self._decoys.credential(self.mechanism, username)
        self._known_user = stored is not None
        credential = decoy if stored is None else stored
        self._username = username
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._client_nonce = client_nonce
        self._full_nonce = client_nonce + self._nonce()
        self._server_first = (
            f"r={self._full_nonce},s={_b64(credential.salt)},i={credential.iterations}"
        )
        return self._server_first.encode("utf-8")

    def final(self, client_final: bytes) -> ScramResult:
        """Check client-final; return the user and server-final.

        :raises ScramError: malformed message, wrong binding echo or nonce, bad proof.
        """
        if self._credential is None or self._username is None:
            raise ScramError("client-final received before client-first")
        credential, self._credential = self._credential, None  # one attempt only
        text = _decode_message(client_final, "client-final message")
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final has no proof")
        attrs_ = _attributes(without_proof, "client-final message")
        if len(attrs_) < 2 or attrs_[0][0] != "c" or attrs_[1][0] != "r":
            raise ScramError("client-final must start with c=<binding>,r=<nonce>")
        binding = _unb64(attrs_[0][1], "channel binding")
        if not hmac.compare_digest(binding, self._gs2_header.encode("utf-8")):
            raise ScramError("channel binding does not match the client-first header")
        nonce = attrs_[1][1].encode()
        # librdkafka before 2.6.1 (still in Debian's and Ubuntu's kcat) sends its own
        # nonce again in front of the full one; Kafka 3.8.1-3.9 accept that form. The
        # server's fresh nonce is still required, and the proof covers the text sent.
        if not (
            hmac.compare_digest(nonce, self._full_nonce.encode())
            or hmac.compare_digest(nonce, (self._client_nonce + self._full_nonce).encode())
        ):
            raise ScramError("nonce does not match")
        proof = _unb64(proof_text, "client proof")
        m = self.mechanism
        if len(proof) != m.digest_size:
            raise ScramError("client proof has the wrong length")
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, without_proof)
        ).encode("utf-8")
        client_signature = m.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(m.h(client_key), credential.stored_key) or not (
            self._known_user
        ):
            raise ScramError(f"authentication failed for user {self._username!r}")
        server_signature = m.hmac(credential.server_key, auth_message)
        return ScramResult(self._username, f"v={_b64(server_signature)}".encode("ascii"))


def _extensions(bare: str) -> list[tuple[str, str]]:
    """Kafka's SCRAM extensions: ``key=value`` attributes after the nonce."""
    out: list[tuple[str, str]] = []
    for part in bare.split(",")[2:]:
        key, _, value = part.partition("=")
        out.append((key, value))
    return out


__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MECHANISMS_BY_CODE",
    "MIN_ITERATIONS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "DecoyCredentials",
    "ScramCredential",
    "ScramError",
    "ScramMechanism",
    "ScramResult",
    "ScramServer",
    "check_iterations",
    "escape_username",
]
