"""brokerd.cli.brokerctl against a scripted client: argument parsing, TLS options,
produce batching and the consume loop (``--follow`` retries transient errors from the
same offset, gives up on a real one)."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from brokerd.cli import brokerctl as cli
from brokerd.client import NativeError
from brokerd.native import messages
from brokerd.native.messages import ErrorCode


class ScriptedClient:
    """Stands in for NativeClient in brokerd.cli.brokerctl: each poll takes the next step."""

    steps: list[Any] = []
    polls: list[int] = []
    connects = 0

    def __init__(self, host: str, port: int, **_: Any) -> None:
        type(self).connects += 1

    def list_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        return 0, 0

    def poll(self, topic: str, partition: int, offset: int, **_: Any) -> Any:
        type(self).polls.append(offset)
        step = type(self).steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    def close(self) -> None:
        pass


def test_follow_retries_transient_errors_from_the_same_offset(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    from brokerd.cli import brokerctl as cli

    def answer(*records: tuple[int, bytes]) -> messages.LongPollFetchResponse:
        return messages.LongPollFetchResponse(
            records[-1][0] + 1, tuple(messages.FetchedRecord(o, v) for o, v in records)
        )

    ScriptedClient.steps = [
        answer((0, b"a"), (1, b"")),  # a null value arrives as b""
        NativeError(ErrorCode.TOO_MANY_WAITERS, "busy"),
        NativeError(ErrorCode.SHUTTING_DOWN, "stopping"),
        ConnectionError("gone"),
        answer((2, b"c")),
        KeyboardInterrupt(),  # Ctrl-C
    ]
    ScriptedClient.polls, ScriptedClient.connects = [], 0
    monkeypatch.setattr(cli, "NativeClient", ScriptedClient)
    monkeypatch.setattr(cli, "RECONNECT_SECONDS", 0.0)
    assert cli.main(["consume", "t", "--follow"]) == 0
    assert capsysbinary.readouterr().out == b"a\n\nc\n"
    assert ScriptedClient.polls == [0, 2, 2, 2, 2, 3]  # no gap, no repeat
    assert ScriptedClient.connects == 4  # a fresh connection after each failure


def test_follow_gives_up_on_a_real_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from brokerd.cli import brokerctl as cli

    ScriptedClient.steps = [NativeError(ErrorCode.OFFSET_OUT_OF_RANGE, "offset 9 > 3")]
    ScriptedClient.polls, ScriptedClient.connects = [], 0
    monkeypatch.setattr(cli, "NativeClient", ScriptedClient)
    assert cli.main(["consume", "t", "--follow"]) == cli.EXIT_ERROR
    assert "OFFSET_OUT_OF_RANGE" in capsys.readouterr().err


def test_address_and_start_parsing() -> None:
    assert cli._address("broker:7071") == ("broker", 7071)
    assert cli._address(":7071") == ("127.0.0.1", 7071)
    for bad in ("broker", "broker:x", "broker:"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli._address(bad)
    assert cli._start("earliest") == "earliest" and cli._start("latest") == "latest"
    assert cli._start("42") == 42
    with pytest.raises(argparse.ArgumentTypeError):
        cli._start("-1")


def test_tls_files_without_tls_are_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--cafile", "ca.pem", "topics", "list"])
    assert exit_.value.code == cli.EXIT_USAGE
    assert "--cafile needs --tls" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["--tls", "--cafile", "/nonexistent/ca.pem", "topics", "list"])
    assert "TLS settings" in capsys.readouterr().err


def test_produce_lines_are_batched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "PRODUCE_BATCH_LINES", 2)
    batches = list(cli._batches(io.BytesIO(b"a\nb\nc\nlast")))
    assert batches == [[b"a", b"b"], [b"c", b"last"]]
    monkeypatch.setattr(cli, "PRODUCE_BATCH_BYTES", 6)
    assert list(cli._batches(io.BytesIO(b"ab\ncd\n"))) == [[b"ab"], [b"cd"]]
    assert list(cli._batches(io.BytesIO(b""))) == []


def test_consume_without_follow_stops_at_the_end_or_the_count(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    def answer(*records: tuple[int, bytes | None]) -> messages.LongPollFetchResponse:
        return messages.LongPollFetchResponse(
            10, tuple(messages.FetchedRecord(o, v) for o, v in records))

    ScriptedClient.steps = [answer((0, b"a"), (2, None)), answer()]
    ScriptedClient.polls, ScriptedClient.connects = [], 0
    monkeypatch.setattr(cli, "NativeClient", ScriptedClient)
    assert cli.main(["consume", "t"]) == 0
    assert capsysbinary.readouterr().out == b"a\n\n"
    assert ScriptedClient.polls == [0, 3]  # from after the last offset: a compaction gap
    ScriptedClient.steps = [answer((0, b"a"), (1, b"b"), (2, b"c"))]
    ScriptedClient.polls = []
    assert cli.main(["consume", "t", "--count", "2", "--from", "0"]) == 0
    assert capsysbinary.readouterr().out == b"a\nb\n"
    assert ScriptedClient.polls == [0]


def test_an_unreachable_broker_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise ConnectionRefusedError("refused")

    monkeypatch.setattr(cli, "NativeClient", refuse)
    assert cli.main(["--bootstrap", "127.0.0.1:1", "topics", "list"]) == cli.EXIT_UNREACHABLE
    assert "cannot reach the broker at 127.0.0.1:1" in capsys.readouterr().err
