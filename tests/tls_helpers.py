"""Throwaway certificates and TLS brokers for the TLS tests.

:func:`make_pki` writes, with ``cryptography``, a CA, a server certificate for
``localhost`` and 127.0.0.1 and client certificates it issued, plus a second ("rogue") CA
and a client certificate from it, each as PEM files in a directory. :class:`TlsBroker`
is a :class:`~tests.brokerproc.BrokerProcess` whose two listeners are ``ssl:`` ones.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from brokerd.client import NativeClient, tls_context

from tests.brokerproc import BrokerProcess

#: Subject of the good client certificate, and the principal it makes.
ALICE_SUBJECT = "CN=alice,O=acme"
ALICE_PRINCIPAL = f"User:{ALICE_SUBJECT}"
_VALIDITY = datetime.timedelta(days=2)


@attrs.frozen
class Pki:
    """Paths of the PEM files :func:`make_pki` wrote."""

    ca: Path  # the CA's certificate (trusted by clients, and by the broker for clients)
    server_cert: Path
    server_key: Path
    alice_cert: Path  # CN=alice,O=acme, issued by ca
    alice_key: Path
    rogue_ca: Path  # another CA, trusted by nobody
    mallory_cert: Path  # CN=mallory, issued by rogue_ca
    mallory_key: Path


def _name(**parts: str) -> x509.Name:
    oids = {"CN": NameOID.COMMON_NAME, "O": NameOID.ORGANIZATION_NAME}
    # Most general first, as certificates list them; RFC 2253 prints them reversed.
    order = sorted(parts, key=lambda k: k != "O")
    return x509.Name([x509.NameAttribute(oids[k], parts[k]) for k in order])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> (
    x509.CertificateBuilder
):
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def _ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    subject = _name(CN=name, O="brokerd tests")
    cert = (
        _builder(subject, subject, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    san: list[x509.GeneralName] | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    key = _key()
    builder = (
        _builder(subject, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    """Write a fresh set of certificates under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca("brokerd test CA")
    rogue = _ca("rogue CA")
    server = _leaf(
        ca,
        _name(CN="localhost"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    alice = _leaf(ca, _name(CN="alice", O="acme"), ExtendedKeyUsageOID.CLIENT_AUTH)
    mallory = _leaf(rogue, _name(CN="mallory"), ExtendedKeyUsageOID.CLIENT_AUTH)
    return Pki(
        ca=_write_cert(ca[0], directory / "ca.pem"),
        server_cert=_write_cert(server[0], directory / "server.pem"),
        server_key=_write_key(server[1], directory / "server.key"),
        alice_cert=_write_cert(alice[0], directory / "alice.pem"),
        alice_key=_write_key(alice[1], directory / "alice.key"),
        rogue_ca=_write_cert(rogue[0], directory / "rogue-ca.pem"),
        mallory_cert=_write_cert(mallory[0], directory / "mallory.pem"),
        mallory_key=_write_key(mallory[1], directory / "mallory.key"),
    )


def ssl_description(port: int, pki: Pki) -> str:
    """A Twisted ``ssl:`` listener string on 127.0.0.1."""
    return (
        f"ssl:{port}:interface=127.0.0.1:privateKey={pki.server_key}:certKey={pki.server_cert}"
    )


class TlsBroker(BrokerProcess):
    """A broker whose native and Kafka listeners are both TLS (``ssl:``)."""

    def __init__(self, data_dir: Path, pki: Pki, *, args: tuple[str, ...] = ()) -> None:
        super().__init__(data_dir, args=args)
        self.pki = pki

    def command(self) -> list[str]:
        assert self.kafka_port is not None
        listeners = {
            "--native=": ssl_description(self.native_port, self.pki),
            "--kafka=": ssl_description(self.kafka_port, self.pki),
        }
        command = []
        for arg in super().command():
            prefix = next((p for p in listeners if arg.startswith(p)), None)
            command.append(prefix + listeners[prefix] if prefix else arg)
        return command

    def tls_client(
        self,
        *,
        cert: Path | None = None,
        key: Path | None = None,
        ca: Path | None = None,
        timeout: float = 10.0,
    ) -> NativeClient:
        context = tls_context(str(ca or self.pki.ca), _opt(cert), _opt(key))
        return NativeClient("127.0.0.1", self.native_port, timeout=timeout, tls=context)


def _opt(path: Path | None) -> str | None:
    return None if path is None else str(path)


def client_context(pki: Pki, *, cert: Path | None = None, key: Path | None = None) -> (
    ssl.SSLContext
):
    return tls_context(str(pki.ca), _opt(cert), _opt(key))
