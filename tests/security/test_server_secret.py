"""The broker's own secret: made once, kept in the data directory, never overwritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokerd.security.server_secret import (
    SECRET_BYTES,
    SECRET_FILE_NAME,
    ServerSecretError,
    load_or_create,
)


def test_the_first_load_makes_and_stores_a_secret_that_later_loads_return(
    tmp_path: Path,
) -> None:
    secret = load_or_create(str(tmp_path))
    assert len(secret) == SECRET_BYTES
    assert (tmp_path / SECRET_FILE_NAME).read_bytes() == secret.hex().encode() + b"\n"
    assert load_or_create(str(tmp_path)) == secret


def test_a_stored_hex_secret_is_read_as_it_is(tmp_path: Path) -> None:
    (tmp_path / SECRET_FILE_NAME).write_bytes(b"  " + b"ab" * 16 + b"\n")
    assert load_or_create(str(tmp_path)) == b"\xab" * 16


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not hex at all", "does not hold a hex secret"),
        (b"abcd", "holds 2 bytes"),
        (b"00" * 600, "too long"),
    ],
)
def test_a_file_without_a_secret_is_refused_and_left_alone(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / SECRET_FILE_NAME
    path.write_bytes(content)
    with pytest.raises(ServerSecretError, match=message):
        load_or_create(str(tmp_path))
    assert path.read_bytes() == content


def test_an_unreadable_directory_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / SECRET_FILE_NAME).mkdir()
    with pytest.raises(OSError):
        load_or_create(str(tmp_path))
    assert os.path.isdir(tmp_path / SECRET_FILE_NAME)
