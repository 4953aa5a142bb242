"""Authentication on the HTTP console and ``/metrics`` (``--http-auth``), and what a
principal sees there under ``--authorizer acl``: real ``twistd broker`` processes and
real HTTP(S) clients.

The ACL broker holds two topics, ``open`` and ``secret``, and a group ``g`` with offsets
of both; ``alice`` may DESCRIBE ``open`` and ``g`` only, ``admin`` is a super user.
"""

from __future__ import annotations

import base64
import http.client
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.native.operator_messages import ResetMode
from brokerd.security.acl import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.security.acl_store import AclStore
from brokerd.security.credentials import CredentialChange, CredentialStore
from brokerd.security.scram import SCRAM_SHA_256, SCRAM_SHA_512

from tests.brokerproc import BrokerProcess
from tests.tls_helpers import ALICE_PRINCIPAL, Pki, make_pki, ssl_description

pytestmark = pytest.mark.broker

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def write_credentials(path: Path) -> str:
    CredentialStore.open(str(path), create=True).alter(
        CredentialChange(name, mech.name, mech.credential(password))
        for name, password in USERS.items()
        for mech in (SCRAM_SHA_256, SCRAM_SHA_512)
    )
    return str(path)


def get(
    port: int, path: str, user: str | None = None, password: str | None = None
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {}
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, (
            response.read().decode()
        )
    finally:
        conn.close()


def allow(rtype: ResourceType, name: str) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, "User:alice", "*", Operation.DESCRIBE,
                      Permission.ALLOW)


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("http-acl")
    data = tmp / "data"
    data.mkdir()
    # Topics and the group's offsets first, while nothing is checked.
    proc = BrokerProcess(data, kafka=False).start()
    try:
        with proc.client() as client:
            for topic, count in (("open", 5), ("secret", 9)):
                client.produce(topic, 0, [b"x"] * count)
                client.reset_offsets("g", topic, ResetMode.OFFSET, value=2)
    finally:
        proc.stop()
    AclStore.in_directory(str(data)).save(
        [allow(ResourceType.TOPIC, "open"), allow(ResourceType.GROUP, "g")]
    )
    proc = BrokerProcess(
        data,
        native=False,
        args=(
            "--sasl", "SCRAM-SHA-256",
            "--credentials", write_credentials(tmp / "credentials.json"),
            "--authorizer", "acl",
            "--super-users", "User:admin",
            "--http-auth", "basic",
        ),
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


def test_basic_right_and_wrong_password(acl_broker: BrokerProcess) -> None:
    port = acl_broker.http_port
    for user, password in ((None, None), ("alice", "wrong"), ("nobody", "alice-secret")):
        status, headers, _ = get(port, "/", user, password)
        assert status == 401, (user, password)
        assert headers["www-authenticate"].startswith('Basic realm="brokerd"')
        assert get(port, "/metrics", user, password)[0] == 401
    status, _, body = get(port, "/", "alice", "alice-secret")
    assert status == 200 and "Overview" in body
    # The probes reveal nothing and stay open; /readyz keeps its reasons to itself.
    assert get(port, "/healthz")[:1] == (200,)
    assert get(port, "/readyz")[0] == 200


def test_the_console_shows_only_what_the_principal_may_describe(
    acl_broker: BrokerProcess,
) -> None:
    port = acl_broker.http_port
    _, _, overview = get(port, "/", "alice", "alice-secret")
    assert "/topics/open" in overview and "secret" not in overview
    assert "/groups/g" in overview
    assert get(port, "/topics/secret", "alice", "alice-secret")[0] == 404
    status, _, group = get(port, "/groups/g", "alice", "alice-secret")
    assert status == 200 and "open" in group and "secret" not in group
    # The broker's settings need DESCRIBE_CONFIGS on the cluster.
    assert "super-users" not in overview
    _, _, everything = get(port, "/", "admin", "admin-secret")
    assert "/topics/secret" in everything and "super-users" in everything
    assert get(port, "/topics/secret", "admin", "admin-secret")[0] == 200


def test_metrics_show_only_what_the_principal_may_describe(acl_broker: BrokerProcess) -> None:
    port = acl_broker.http_port
    status, _, alice = get(port, "/metrics", "alice", "alice-secret")
    assert status == 200
    assert 'brokerd_partition_log_end_offset{partition="0",topic="open"} 5.0' in alice
    assert 'brokerd_group_committed_offset{group="g",partition="0",topic="open"} 2.0' in alice
    assert 'brokerd_group_lag_total{group="g"}' in alice
    assert "secret" not in alice
    assert "process_cpu_seconds_total" in alice  # series of no topic or group stay
    _, _, admin = get(port, "/metrics", "admin", "admin-secret")
    assert 'topic="secret"' in admin


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("http-pki"))


def test_certificate_auth_on_an_ssl_http_listener(tmp_path: Path, pki: Pki) -> None:
    data = tmp_path / "data"
    data.mkdir()
    AclStore.in_directory(str(data)).save([
        AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, ALICE_PRINCIPAL,
                   "*", Operation.DESCRIBE_CONFIGS, Permission.ALLOW),
    ])
    proc = BrokerProcess(data, kafka=False)
    proc.args = (
        f"--http={ssl_description(proc.http_port, pki)}",
        "--http-auth", "certificate",
        f"--ssl-client-ca={pki.ca}",
        f"--schema-registry={ssl_description(proc.schema_registry_port, pki)}",
        f"--http-proxy={ssl_description(proc.http_proxy_port, pki)}",
        # The certificate's subject is the principal, allowed to see the settings.
        "--authorizer", "acl",
    )
    proc.start()
    try:
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.load_cert_chain(str(pki.alice_cert), str(pki.alice_key))
        conn = http.client.HTTPSConnection("127.0.0.1", proc.http_port, context=context,
                                           timeout=10)
        conn.request("GET", "/")
        response = conn.getresponse()
        body = response.read().decode()
        assert response.status == 200, body
        assert "super-users" in body
        conn.close()
        bare = ssl.create_default_context(cafile=str(pki.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", proc.http_port, context=bare,
                                           timeout=10)
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            # TLS 1.3 reports the refused handshake at the first read.
            conn.request("GET", "/")
            conn.getresponse().read()
        conn.close()
        assert "HTTP endpoint requires client certificates" in proc.log()
    finally:
        proc.stop()
