"""``twistd broker --config FILE``: reading and checking the TOML file, its precedence
under the command line, the generated example file, and real starts of twistd."""

from __future__ import annotations

import re
import runpy
import subprocess
import time
import tomllib
from pathlib import Path
from typing import cast

import pytest
from twisted.python import usage

from brokerd.app.config_file import (
    MAX_CONFIG_BYTES,
    UNSET_NOTE,
    ConfigError,
    key_line,
    load,
    specs_from_options,
)
from brokerd.app.config_file_options import option_specs
from brokerd.client import NativeError
from brokerd.core import FsyncPolicy
from brokerd.tap import Options

from tests.brokerproc import REPO, TWISTD, BrokerProcess, env, wait_for_port

EXAMPLE = REPO / "deploy" / "brokerd.toml"


def write(tmp_path: Path, text: str, name: str = "brokerd.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


def usage_error(*args: str) -> str:
    with pytest.raises(usage.UsageError) as info:
        parse(*args)
    return str(info.value)


# -- a good file --------------------------------------------------------------------


def test_a_good_file_sets_every_kind_of_option(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
# comments and blank lines are fine

data-dir = "/var/lib/brokerd"
kafka = "tcp:9093:interface=127.0.0.1"
fsync = "interval:50"
segment-bytes = 1073741824
cleaner-io-mb-per-sec = 2          # an integer for a float option
message-max-bytes = 2000000        # a number for a numeric text option
log-cleaner-min-cleanable-ratio = 0.25
log-cleanup-policy = "compact"
no-auto-create = true
""",
    )
    o = parse("--config", path)
    assert o["data-dir"] == "/var/lib/brokerd"
    assert o["kafka"] == "tcp:9093:interface=127.0.0.1"
    assert o.settings.core.fsync == FsyncPolicy("interval", 50)
    assert o["segment-bytes"] == 1073741824
    assert o["cleaner-io-mb-per-sec"] == 2.0 and isinstance(o["cleaner-io-mb-per-sec"], float)
    assert o["no-auto-create"] is True
    # The topic-default options reach the same checks and normal forms as from flags.
    assert o.settings.storage.topic_defaults["max.message.bytes"] == "2000000"
    assert o.settings.storage.topic_defaults["min.cleanable.dirty.ratio"] == parse(
        "--log-cleaner-min-cleanable-ratio", "0.25"
    ).settings.storage.topic_defaults["min.cleanable.dirty.ratio"]
    assert o.settings.storage.topic_defaults["cleanup.policy"] == "compact"
    # Untouched options keep their defaults.
    assert o["native"] == Options()["native"]
    assert o["read-threads"] == 4


def test_snake_case_keys_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, 'data_dir = "/srv/b"\nsegment_bytes = 4096\nno_auto_create = true\n')
    o = parse("--config", path)
    assert (o["data-dir"], o["segment-bytes"], o["no-auto-create"]) == ("/srv/b", 4096, True)


def test_the_same_option_twice_under_both_spellings_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "segment-bytes = 4096\nsegment_bytes = 8192\n")
    message = usage_error("--config", path)
    assert f"{path}, line 2" in message and "'segment_bytes'" in message


def test_an_empty_file_changes_nothing(tmp_path: Path) -> None:
    o = parse("--config", write(tmp_path, ""))
    default = parse()
    for name in ("data-dir", "segment-bytes", "no-auto-create", "kafka"):
        assert o[name] == default[name]


# -- errors: each names the file, the key and its line -------------------------------


def test_toml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'data-dir = "/x"\n\nsegment-bytes = \n')
    message = usage_error("--config", path)
    assert path in message and "line 3" in message and "not valid TOML" in message


def test_unknown_key_suggests_the_near_miss(tmp_path: Path) -> None:
    path = write(tmp_path, 'data-dir = "/x"\n  segment-byte = 4096\n')
    message = usage_error("--config", path)
    assert f"{path}, line 2: unknown key 'segment-byte'" in message
    assert "did you mean 'segment-bytes'?" in message


def test_unknown_key_without_a_near_miss_has_no_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "zzzz = 1\n")
    message = usage_error("--config", path)
    assert f"{path}, line 1: unknown key 'zzzz'" in message and "did you mean" not in message


def test_config_cannot_name_another_config_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'config = "/other.toml"\n')
    assert f"{path}, line 1: unknown key 'config'" in usage_error("--config", path)


def test_a_table_is_an_unknown_key_at_its_header_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'data-dir = "/x"\n[broker]\nsegment-bytes = 4096\n')
    assert f"{path}, line 2: unknown key 'broker'" in usage_error("--config", path)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('segment-bytes = "1G"', 'segment-bytes must be an integer, not a string ("1G")'),
        ("segment-bytes = 1.5", "segment-bytes must be an integer, not a float (1.5)"),
        ("segment-bytes = true", "segment-bytes must be an integer, not a boolean (true)"),
        ("cleaner-io-mb-per-sec = false", "must be a number, not a boolean"),
        ("data-dir = 5", "data-dir must be a string, not an integer (5)"),
        ("kafka = [1, 2]", "kafka must be a string, not an array"),
        ("no-auto-create = 1", "no-auto-create must be a boolean (true or false), not an integer"),
        ('no-auto-create = "yes"', "must be a boolean (true or false), not a string"),
        ("message-max-bytes = true", "must be a number or a string, not a boolean"),
    ],
)
def test_wrong_types_are_refused(tmp_path: Path, line: str, expected: str) -> None:
    path = write(tmp_path, f"# a comment\n{line}\n")
    message = usage_error("--config", path)
    assert f"{path}, line 2: " in message and expected in message, message


def test_unreadable_missing_oversized_and_non_utf8_files(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.toml")
    assert f"{missing}: cannot read the config file" in usage_error("--config", missing)
    assert "cannot read" in usage_error("--config", str(tmp_path))  # a directory
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    assert f"{big}: larger than {MAX_CONFIG_BYTES} bytes, not a config file" in usage_error(
        "--config", str(big)
    )
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'data-dir = "/x"\nkafka = "caf\xe9"\n')
    assert f"{latin}, line 2: not UTF-8" in usage_error("--config", str(latin))


# -- the pure parts -----------------------------------------------------------------


def test_key_line_scan_is_top_level_and_best_effort() -> None:
    lines = [
        "# data-dir = commented",
        'kafka = "none"',
        '"data-dir" = "/x"',
        "[table]",
        "segment-bytes = 1",
    ]
    assert key_line(lines, "data-dir") == 3
    assert key_line(lines, "kafka") == 2
    assert key_line(lines, "table") == 4
    assert key_line(lines, "segment-bytes") is None  # inside a table: not a top-level key


def test_load_returns_values_and_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "\nread-threads = 8\n")
    loaded = load(path, option_specs(Options))
    assert loaded.values == {"read-threads": 8}
    assert loaded.lines == {"read-threads": 2}
    assert loaded.where("read-threads") == f"{path}, line 2"


def test_every_option_has_a_config_file_type() -> None:
    specs = option_specs(Options)
    parameters = cast(list[list[object]], Options.optParameters)
    declared = {p[0] for p in parameters} | {f[0] for f in Options.optFlags}
    assert set(specs) == declared - {"config"}
    assert specs["no-auto-create"].kind == "flag"
    assert specs["segment-bytes"].kind == "int"
    assert specs["cleaner-io-mb-per-sec"].kind == "float"
    assert specs["message-max-bytes"].kind == "number-text"
    assert specs["kafka"].kind == "str"


def test_an_option_with_an_unknown_coercion_is_a_programming_error() -> None:
    with pytest.raises(TypeError):
        specs_from_options([["x", None, "1", "help", lambda s: s]], [])


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# -- the example file ---------------------------------------------------------------


def example_lines() -> list[str]:
    return EXAMPLE.read_text().splitlines()


def test_example_is_generated_from_the_options() -> None:
    generated = runpy.run_path(str(REPO / "tools" / "config_example.py"))["example_text"]()
    assert EXAMPLE.read_text() == generated, "run .venv/bin/python tools/config_example.py"


def test_example_has_every_option_once() -> None:
    keys = [m.group(1) for line in example_lines() if (m := re.match(r"# ([a-z-]+) = ", line))]
    assert sorted(keys) == sorted(option_specs(Options))
    assert len(keys) == len(set(keys))


def test_example_uncommented_is_a_valid_file_of_the_defaults(tmp_path: Path) -> None:
    assert tomllib.loads(EXAMPLE.read_text()) == {}  # all commented out as shipped
    body = [
        line[2:]
        for line in example_lines()
        if re.match(r"# [a-z-]+ = ", line) and UNSET_NOTE not in line
    ]
    path = write(tmp_path, "\n".join(body) + "\n")
    from_file, default = parse("--config", path), parse()
    for name in option_specs(Options):
        assert from_file[name] == default[name], name


# -- real starts --------------------------------------------------------------------


class ConfigBroker(BrokerProcess):
    """A broker whose every setting but the log file comes from a config file."""

    def __init__(self, data_dir: Path, config: Path) -> None:
        super().__init__(data_dir)
        self.config = config
        config.write_text(
            f'data-dir = "{data_dir}"\n'
            f'native = "tcp:{self.native_port}:interface=127.0.0.1"\n'
            f'kafka = "tcp:{self.kafka_port}:interface=127.0.0.1"\n'
            f'http = "tcp:{self.http_port}:interface=127.0.0.1"\n'
            f'schema-registry = "tcp:{self.schema_registry_port}:interface=127.0.0.1"\n'
            f'http-proxy = "tcp:{self.http_proxy_port}:interface=127.0.0.1"\n'
            'fsync = "never"\n'
            "segment-bytes = 65536\n"
            "no-auto-create = true\n"
        )

    def command(self) -> list[str]:
        return [
            str(TWISTD),
            "--nodaemon",
            "--pidfile=",
            f"--logfile={self.log_path}",
            "broker",
            f"--config={self.config}",
        ]


@pytest.mark.broker
def test_twistd_broker_starts_and_serves_from_a_config_file(tmp_path: Path) -> None:
    broker = ConfigBroker(tmp_path / "data", tmp_path / "brokerd.toml").start()
    try:
        # Both listeners from the file accept (start() waited for them too).
        assert broker.kafka_port is not None
        assert wait_for_port(broker.kafka_port, time.monotonic() + 5)
        with broker.client() as client:
            # no-auto-create from the file: an unknown topic is refused, not created.
            with pytest.raises(NativeError) as info:
                client.produce("auto", 0, [b"x"])
            assert info.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
            client.create_topic("t")
            client.produce("t", 0, [b"a", b"b"])
            assert client.fetch("t", 0, 0) == [b"a", b"b"]
        assert (tmp_path / "data" / "t-0").is_dir()  # data-dir from the file
    finally:
        # twistd ends a clean SIGTERM shutdown by re-raising the signal.
        assert broker.stop() == -15
    assert "Server Shut Down" in broker.log()


@pytest.mark.broker
def test_twistd_broker_refuses_a_bad_config_file(tmp_path: Path) -> None:
    config = write(tmp_path, 'data-dir = "d"\nsegment-bytes = 1024\nkafka-port = 9092\n')
    r = subprocess.run(
        [str(TWISTD), "--nodaemon", "--pidfile=", "broker", f"--config={config}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert r.returncode == 1
    # twistd prints usage errors, with the options' help, on stdout.
    output = r.stdout + r.stderr
    assert f"{config}, line 3: unknown key 'kafka-port'" in output, output
    assert not (tmp_path / "d").exists()  # refused before anything was created
