"""No anonymous door by accident: with authentication on the Kafka listener, the broker
refuses to start while another listener serves anonymous clients the operator did not
name in ``--allow-anonymous``, and logs every such listener at start. The rule itself
(pure), the options, and real ``twistd broker`` processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from twisted.python import usage

from brokerd.security.credentials import CredentialStore
from brokerd.security.doors import (
    Door,
    HttpAuth,
    ListenerSecurity,
    anonymous_doors,
    is_local_description,
    parse_allow_anonymous,
    refusal,
)
from brokerd.tap import Options

from tests.brokerproc import TWISTD, BrokerProcess, env, free_port

LOOPBACK = "tcp:7070:interface=127.0.0.1"
KAFKA = "tcp:9092:interface=127.0.0.1"
TLS = "ssl:7071:interface=127.0.0.1:privateKey=k.pem:certKey=c.pem"


def listeners(**changes: object) -> ListenerSecurity:
    values: dict[str, object] = {
        "native": LOOPBACK, "kafka": KAFKA, "http": "tcp:8070:interface=127.0.0.1",
        "sasl": True, "certificates_required": False, "http_auth": HttpAuth.NONE,
    }
    values.update(changes)
    return ListenerSecurity(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "description, local",
    [
        ("tcp:8070:interface=127.0.0.1", True),
        ("tcp:8070:interface=127.1.2.3", True),
        (r"tcp6:8070:interface=\:\:1", True),
        ("tcp:8070:interface=localhost", True),
        ("unix:/run/brokerd/http.sock", True),
        ("tcp:8070", False),  # every address
        ("tcp:8070:interface=0.0.0.0", False),
        ("tcp:8070:interface=10.0.0.5", False),
        ("ssl:8443:privateKey=k.pem:interface=192.168.1.1", False),
        ("systemd:domain=INET:index=0", False),  # address unknown: counted as beyond
    ],
)
def test_which_descriptions_are_local(description: str, local: bool) -> None:
    assert is_local_description(description) is local


def test_doors_only_when_the_kafka_listener_requires_authentication() -> None:
    assert anonymous_doors(listeners(sasl=False)) == []
    assert anonymous_doors(listeners(kafka="none")) == []
    # TLS client certificates on the Kafka listener count as authentication ...
    tls_kafka = listeners(sasl=False, kafka=TLS, certificates_required=True)
    assert [d.door for d in anonymous_doors(tls_kafka)] == [Door.NATIVE, Door.HTTP]
    # ... and close an ssl: native listener too.
    assert [d.door for d in anonymous_doors(listeners(native=TLS, certificates_required=True))] \
        == [Door.HTTP]
    assert [d.door for d in anonymous_doors(listeners(native="none"))] == [Door.HTTP]


def test_refusal_names_each_door_and_the_option() -> None:
    message = refusal(listeners(http="tcp:8070:interface=0.0.0.0"), ())
    assert message is not None
    assert "(--sasl)" in message
    assert f"--native {LOOPBACK}" in message and "--allow-anonymous native" in message
    assert "--http tcp:8070:interface=0.0.0.0" in message
    assert "--allow-anonymous http" in message
    # Loopback HTTP is reported but needs no allowing; a named door is accepted.
    assert refusal(listeners(), {Door.NATIVE}) is None
    assert refusal(listeners(http="tcp:8070", http_auth=HttpAuth.BASIC), {Door.NATIVE}) is None
    assert refusal(listeners(http="tcp:8070"), {Door.NATIVE}) is not None
    assert refusal(listeners(http="tcp:8070"), {Door.NATIVE, Door.HTTP}) is None


def test_allow_anonymous_names_known_listeners_only() -> None:
    assert parse_allow_anonymous("native, HTTP") == {Door.NATIVE, Door.HTTP}
    assert parse_allow_anonymous("") == frozenset()
    with pytest.raises(ValueError, match="unknown listener 'kafka'"):
        parse_allow_anonymous("kafka")


def credentials(tmp_path: Path) -> str:
    path = tmp_path / "credentials.json"
    CredentialStore.open(str(path), create=True).alter([])
    return str(path)


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


def test_options(tmp_path: Path) -> None:
    creds = credentials(tmp_path)
    with pytest.raises(usage.UsageError, match="--allow-anonymous native"):
        parse("--sasl", "SCRAM-SHA-256", "--credentials", creds)
    assert parse("--sasl", "SCRAM-SHA-256", "--credentials", creds, "--native", "none")
    with pytest.raises(usage.UsageError, match="unknown listener"):
        parse("--allow-anonymous", "kafka")
    # HTTP Basic never in clear text beyond loopback, as PLAIN.
    with pytest.raises(usage.UsageError, match="clear text"):
        parse("--http", "tcp:8070", "--http-auth", "basic", "--credentials", creds)
    with pytest.raises(usage.UsageError, match="needs --credentials"):
        parse("--http-auth", "basic")
    with pytest.raises(usage.UsageError, match="ssl: --http listener"):
        parse("--http-auth", "certificate")
    # The REST Proxy: the same --http-auth, and the same refusal beyond loopback.
    with pytest.raises(usage.UsageError, match="clear text on --http-proxy"):
        parse("--http-proxy", "tcp:8082", "--http-auth", "basic", "--credentials", creds)
    with pytest.raises(usage.UsageError, match="--http-proxy tcp:8082"):
        parse("--sasl", "SCRAM-SHA-256", "--credentials", creds, "--native", "none",
              "--http-proxy", "tcp:8082")
    with pytest.raises(usage.UsageError, match="--allow-anonymous http-proxy"):
        parse("--sasl", "SCRAM-SHA-256", "--credentials", creds, "--native", "none",
              "--http-proxy", "tcp:8082", "--allow-anonymous", "http")
    assert parse("--sasl", "SCRAM-SHA-256", "--credentials", creds, "--native", "none",
                 "--http-proxy", "tcp:8082", "--allow-anonymous", "http-proxy")
    with pytest.raises(usage.UsageError, match="must be one of"):
        parse("--http-auth", "digest")


def run_broker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TWISTD), "--nodaemon", "--pidfile=", "broker", f"--data-dir={tmp_path / 'd'}",
         f"--native=tcp:{free_port()}:interface=127.0.0.1",
         f"--kafka=tcp:{free_port()}:interface=127.0.0.1",
         f"--http=tcp:{free_port()}:interface=127.0.0.1",
         f"--schema-registry=tcp:{free_port()}:interface=127.0.0.1", *args],
        capture_output=True, text=True, timeout=60, env=env(), check=False, cwd=tmp_path,
    )


@pytest.mark.broker
def test_sasl_with_the_native_listener_refuses_to_start(tmp_path: Path) -> None:
    done = run_broker(tmp_path, "--sasl", "SCRAM-SHA-256", "--credentials", credentials(tmp_path))
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "requires authentication (--sasl)" in out, out
    assert "--native tcp:" in out and "--allow-anonymous native" in out, out
    assert not (tmp_path / "d").exists()  # refused before anything was opened


@pytest.mark.broker
def test_an_anonymous_console_beyond_loopback_refuses_to_start(tmp_path: Path) -> None:
    # Refused while parsing the options: nothing is bound to every address.
    done = run_broker(tmp_path, "--sasl", "SCRAM-SHA-256", "--credentials", credentials(tmp_path),
                      "--native", "none", f"--http=tcp:{free_port()}")
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "--http tcp:" in out and "--allow-anonymous http" in out, out
    assert "--native" not in out.split("requires authentication", 1)[1], out


@pytest.mark.broker
def test_an_allowed_door_starts_and_is_logged(tmp_path: Path) -> None:
    proc = BrokerProcess(
        tmp_path / "data",
        args=("--sasl", "SCRAM-SHA-256", "--credentials", credentials(tmp_path),
              "--allow-anonymous", "native"),
    ).start()
    try:
        with proc.client() as client:
            client.create_topic("t")  # the door is open, as the operator said
        log = proc.log()
    finally:
        proc.stop()
    doors = [line for line in log.splitlines() if "Anonymous door" in line]
    assert len(doors) == 4, log
    native, http, registry, proxy = doors
    assert f"--native tcp:{proc.native_port}:interface=127.0.0.1" in native
    assert "allowed by --allow-anonymous native" in native
    assert f"--http tcp:{proc.http_port}:interface=127.0.0.1" in http
    assert "loopback only" in http
    assert f"--schema-registry tcp:{proc.schema_registry_port}:interface=127.0.0.1" in registry
    assert "loopback only" in registry
    # The REST Proxy on loopback: reported, allowed (local clients only), as the console.
    assert f"--http-proxy tcp:{proc.http_proxy_port}:interface=127.0.0.1" in proxy
    assert "loopback only" in proxy and "REST Proxy" in proxy


@pytest.mark.broker
def test_native_none_with_sasl_starts_without_a_door(tmp_path: Path) -> None:
    proc = BrokerProcess(
        tmp_path / "data", native=False,
        args=("--sasl", "SCRAM-SHA-256", "--credentials", credentials(tmp_path),
              "--http-auth", "basic"),
    ).start()
    try:
        log = proc.log()
    finally:
        proc.stop()
    assert "Anonymous door" not in log, log
    assert "Kafka listener on" in log
