"""The registry's value types' one piece of logic: Confluent's wire framing."""

from __future__ import annotations

from brokerd.registry.model import RegistryError, framed, unframe


def test_framing_round_trips_and_unframed_values_are_told_apart() -> None:
    value = framed(0x01020304, b"body")
    assert value == b"\x00\x01\x02\x03\x04body"
    assert unframe(value) == (0x01020304, b"body")
    assert unframe(framed(7, b"")) == (7, b"")
    assert unframe(b"\x00\x00\x00\x07") is None  # too short for an id
    assert unframe(b"\x01\x00\x00\x00\x07body") is None  # another magic byte
    error = RegistryError(404, 40401, "Subject 'x' not found.")
    assert (error.http_status, error.error_code, str(error)) == (404, 40401, error.message)
