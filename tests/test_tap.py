"""``twistd broker`` options, the plugin, and the shipped systemd units."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from twisted.python import usage

from brokerd.app.options import DEFAULT_HTTP_PROXY, DEFAULT_KAFKA, DEFAULT_NATIVE
from brokerd.core import FsyncPolicy
from brokerd.tap import Options

from tests.brokerproc import REPO, TWISTD, env


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


def test_defaults_are_the_pinned_ones() -> None:
    o = parse()
    assert o["data-dir"] == "./data"
    assert o["native"] == DEFAULT_NATIVE == "tcp:7070:interface=127.0.0.1"
    assert o["kafka"] == DEFAULT_KAFKA == "tcp:9092:interface=127.0.0.1"
    assert o["http-proxy"] == DEFAULT_HTTP_PROXY == "tcp:8082:interface=127.0.0.1"
    assert o.settings.core.fsync == FsyncPolicy("always")
    assert o["segment-bytes"] == 1024**3
    assert not o["no-auto-create"]


def test_options_are_validated() -> None:
    assert parse("--fsync", "interval:50").settings.core.fsync == FsyncPolicy("interval", 50)
    assert parse("--fsync", "never").settings.core.fsync == FsyncPolicy("never")
    for bad in (
        ["--fsync", "sometimes"],
        ["--segment-bytes", "0"],
        ["--segment-bytes", "10"],
        ["--retention-ms", "0"],
        ["--default-partitions", "0"],
        ["--max-produce-bytes", "-1"],
    ):
        with pytest.raises(usage.UsageError):
            parse(*bad)


def test_twistd_lists_the_plugin_from_the_development_install(tmp_path: Path) -> None:
    # Run from elsewhere so the checkout is not on sys.path by accident; the editable
    # install (make install) must make the plugin visible on its own.
    out = subprocess.run(
        [str(TWISTD), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert any(line.split()[:1] == ["broker"] for line in out.stdout.splitlines()), out.stdout


@pytest.mark.broker
def test_bind_failure_exits_non_zero(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(
            [
                str(TWISTD),
                "-n",
                "--pidfile=",
                "broker",
                f"--data-dir={tmp_path / 'd'}",
                f"--native=tcp:{port}:interface=127.0.0.1",
                "--kafka=none",
                "--schema-registry=none",
                "--http-proxy=none",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env=env(),
        )
    assert r.returncode != 0


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_systemd_units_verify_clean(tmp_path: Path) -> None:
    units = REPO / "deploy" / "systemd"
    venv = Path(sys.executable).parent.parent
    for unit in units.iterdir():
        text = unit.read_text().replace("/opt/brokerd/venv", str(venv))
        (tmp_path / unit.name).write_text(text)
    names = sorted(str(p) for p in tmp_path.iterdir())
    r = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *names], capture_output=True, text=True
    )
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr


def test_connection_cap_refuses_beyond_the_limit(make_broker: object) -> None:
    """With --max-connections 3, a fourth connection is closed at once; closing one frees
    a slot; the connections inside the cap keep working."""
    import socket

    proc = make_broker("--max-connections", "3", kafka=False)  # type: ignore[operator]
    proc.until_connections(0)  # the harness's readiness probe is closed and counted out
    held = [proc.client() for _ in range(3)]
    for client in held:
        assert client.list_topics() == []  # accepted and served
    extra = socket.create_connection(("127.0.0.1", proc.native_port), timeout=5)
    with contextlib.suppress(ConnectionResetError):
        assert extra.recv(1) == b"", "a connection beyond the cap must be closed"
    extra.close()
    held.pop().close()
    proc.until_connections(2)
    with proc.client() as client:
        assert client.list_topics() == []
    for client in held:
        assert client.list_topics() == []
        client.close()
    assert "refusing new ones" in proc.log()


def test_broker_settings_are_readable_text_without_built_objects() -> None:
    settings = parse(
        "--super-users", "User:bob,User:alice", "--authorizer", "acl", "--no-auto-create"
    ).settings.web.shown_options
    assert settings["super-users"] == "User:alice,User:bob"
    assert settings["no-auto-create"] == "true"
    assert settings["fsync"] == "always"
    assert settings["http"] == "tcp:8070:interface=127.0.0.1"
    for built in ("credential-store", "client-verification", "topic-defaults", "fsync-policy"):
        assert built not in settings
    assert set(settings) <= set(parse()) | {"super-users"}
    assert parse().settings.web.shown_options["super-users"] == "(none)"
