"""brokerd.app.config_file_options: ``--config`` applied under the command line (every
flag given there wins, whatever the order, abbreviations read as the parser reads them),
and the options' own check errors pointed at the file's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.core import FsyncPolicy

from tests.app.test_config_file import parse, usage_error, write

# -- precedence ---------------------------------------------------------------------


def test_the_command_line_overrides_the_file_whatever_the_order(tmp_path: Path) -> None:
    path = write(tmp_path, 'data-dir = "/from/file"\nsegment-bytes = 4096\nfsync = "never"\n')
    before = parse("-d", "/from/flag", "--segment-bytes", "8192", "--config", path)
    after = parse("--config", path, "--data-dir=/from/flag", "--segment-bytes=8192")
    for o in (before, after):
        assert o["data-dir"] == "/from/flag"
        assert o["segment-bytes"] == 8192
        assert o.settings.core.fsync == FsyncPolicy("never")  # not on the command line: file


def test_an_abbreviated_config_flag_is_read_like_the_parser_reads_it(tmp_path: Path) -> None:
    path = write(tmp_path, "segment-bytes = 4096\n")
    assert parse(f"--conf={path}")["segment-bytes"] == 4096


def test_a_flag_set_in_the_file_or_on_the_command_line(tmp_path: Path) -> None:
    on = write(tmp_path, "no-auto-create = true\n", "on.toml")
    off = write(tmp_path, "no-auto-create = false\n", "off.toml")
    assert parse("--config", on)["no-auto-create"] is True
    assert not parse("--config", off)["no-auto-create"]
    assert parse("--config", off, "--no-auto-create")["no-auto-create"]


# -- check errors blame the file's line ------------------------------------------


@pytest.mark.parametrize(
    ("text", "option"),
    [
        ("segment-bytes = 10", "--segment-bytes must be at least 1024"),
        ('fsync = "sometimes"', "sometimes"),
        ("retention-ms = 0", "--retention-ms must be positive or -1"),
        ("max-connections = -1", "--max-connections"),
        ('sasl = "PLAIN"', "--sasl needs --credentials"),
    ],
)
def test_the_option_checks_apply_to_values_from_the_file(
    tmp_path: Path, text: str, option: str
) -> None:
    path = write(tmp_path, f'data-dir = "/x"\n{text}\n')
    message = usage_error("--config", path)
    assert option in message
    key = text.split(" ")[0]
    if key != "fsync":  # FsyncPolicy's message does not name the flag
        assert f"{key} set in {path}, line 2" in message, message


def test_a_topic_default_check_points_at_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'log-cleanup-policy = "bogus"\n')
    message = usage_error("--config", path)
    assert "cleanup.policy" in message and f"log-cleanup-policy set in {path}, line 1" in message


def test_a_bad_file_value_overridden_on_the_command_line_is_not_blamed(tmp_path: Path) -> None:
    path = write(tmp_path, "segment-bytes = 10\n")
    assert parse("--config", path, "--segment-bytes", "4096")["segment-bytes"] == 4096
    message = usage_error("--config", path, "--segment-bytes", "5")
    assert "--segment-bytes must be" in message and path not in message
