"""brokerd.app.options: the effective options as the console shows them, and the
option table's own consistency (every topic-default flag is an option, parsing builds
the settings once)."""

from __future__ import annotations

import pytest
from twisted.python import usage

from brokerd.app.options import (
    DEFAULT_KAFKA,
    DEFAULT_NATIVE,
    TOPIC_DEFAULT_FLAGS,
    Options,
    options_text,
)


def test_options_text_shows_flags_sets_and_leaves_out_unset() -> None:
    shown = options_text(
        {"no-auto-create": 0, "http-console-readonly": 1, "data-dir": "/d",
         "sasl": None, "doors": {"b", "a"}, "segment-bytes": 4096, "empty": []},
        frozenset({"User:z", "User:a"}),
    )
    assert shown == {
        "data-dir": "/d",
        "doors": "a,b",
        "empty": "(none)",
        "http-console-readonly": "true",
        "no-auto-create": "false",
        "segment-bytes": "4096",
        "super-users": "User:a,User:z",
    }
    assert list(shown) == sorted(shown)
    assert options_text({}, frozenset())["super-users"] == "(none)"


def test_every_topic_default_flag_is_an_option() -> None:
    names = {p[0] for p in Options.optParameters} | {f[0] for f in Options.optFlags}
    assert set(TOPIC_DEFAULT_FLAGS) <= names
    assert all("." in config for config in TOPIC_DEFAULT_FLAGS.values())


def test_parsing_gives_defaults_and_typed_settings() -> None:
    options = Options()
    options.parseOptions(["--segment-bytes", "4096"])
    assert options["native"] == DEFAULT_NATIVE and options["kafka"] == DEFAULT_KAFKA
    assert options.settings.listeners.native == DEFAULT_NATIVE
    assert options["segment-bytes"] == 4096
    with pytest.raises(usage.UsageError, match="--segment-bytes"):
        Options().parseOptions(["--segment-bytes", "0"])
