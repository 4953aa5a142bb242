# -*- test-case-name: tests.cli.test_brokerctl -*-
"""``brokerctl``: a command-line client of the native protocol.

Commands (see ``brokerctl --help``)::

    brokerctl [--bootstrap HOST:PORT] [TLS options] topics create NAME [--partitions N]
    brokerctl topics list
    brokerctl produce TOPIC [--partition P]          one record per stdin line
    brokerctl consume TOPIC [--partition P] [--from OFFSET|earliest|latest]
                            [--count N] [--follow]   one value per stdout line
    brokerctl topics describe|alter|delete|add-partitions ...   see brokerd.cli.topics_groups
    brokerctl groups list|describe|reset-offsets|delete ...     see brokerd.cli.topics_groups
    brokerctl queue work GROUP TOPIC [--partition P] [--exec CMD] ...   see brokerd.cli.queue
    brokerctl share-groups list|describe ...          see brokerd.cli.queue
    brokerctl users add|delete|list ...               see brokerd.cli.users

TLS options: ``--tls`` (verify the broker against the system's CAs, or ``--cafile FILE``),
``--certfile FILE``/``--keyfile FILE`` (a client certificate), ``--tls-server-name NAME``
(the name the broker's certificate must carry, default the bootstrap host).

Exit status: 0 success, 1 the broker answered an error, 2 bad usage, 3 the broker could
not be reached or dropped the connection.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import time
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import attrs

from brokerd.cli.queue import add_queue_parsers, run_queue, run_share_groups
from brokerd.cli.topics_groups import (
    TOPIC_OPERATOR_COMMANDS,
    add_groups_parser,
    add_topic_parsers,
    run_groups,
    run_topic_commands,
)
from brokerd.cli.users import add_users_parser, run_users
from brokerd.client import NativeClient, NativeError, tls_context
from brokerd.names import COLLISION_WARNING, has_collision_chars
from brokerd.native.messages import ErrorCode

DEFAULT_BOOTSTRAP = "127.0.0.1:7070"
#: A produce request carries at most this many lines or bytes, well under the broker's
#: default 1 MiB produce limit.
PRODUCE_BATCH_LINES = 1000
PRODUCE_BATCH_BYTES = 512 * 1024
#: Long-poll wait of ``consume --follow``; also how often it notices a broker restart.
FOLLOW_WAIT_MS = 5000
#: Seconds between reconnection attempts while following a broker that went away.
RECONNECT_SECONDS = 0.5

#: Errors after which ``consume --follow`` retries instead of giving up.
_RETRY_CODES = frozenset({ErrorCode.SHUTTING_DOWN, ErrorCode.TOO_MANY_WAITERS})

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {text!r}")
    return host or "127.0.0.1", int(port)


def _start(text: str) -> str | int:
    if text in ("earliest", "latest"):
        return text
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"expected an offset, 'earliest' or 'latest', not {text!r}")


@attrs.frozen
class Target:
    """Where and how to connect: the broker's address and the TLS settings."""

    host: str
    port: int
    tls: ssl.SSLContext | None = None
    server_hostname: str | None = None

    def connect(self) -> NativeClient:
        return NativeClient(
            self.host, self.port, tls=self.tls, server_hostname=self.server_hostname
        )


def _add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    tls = parser.add_argument_group("TLS (a broker --native ssl: listener)")
    tls.add_argument("--tls", action="store_true", help="connect with TLS")
    tls.add_argument("--cafile", help="PEM CAs to verify the broker with (default: the system's)")
    tls.add_argument("--certfile", help="PEM client certificate (with its key, or see --keyfile)")
    tls.add_argument("--keyfile", help="PEM private key of --certfile")
    tls.add_argument(
        "--tls-server-name",
        help="name the broker's certificate must carry (default: the bootstrap host)",
    )


def _target(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Target:
    host, port = args.bootstrap
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("cafile", "certfile", "keyfile", "tls_server_name")
        if getattr(args, name) is not None
    ]
    if not args.tls:
        if given:
            parser.error(f"{', '.join(given)} needs --tls")
        return Target(host, port)
    try:
        context = tls_context(args.cafile, args.certfile, args.keyfile)
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        parser.error(f"TLS settings: {e}")
    return Target(host, port, context, args.tls_server_name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brokerctl", description="Talk to a brokerd broker.")
    parser.add_argument(
        "--bootstrap",
        type=_address,
        default=_address(DEFAULT_BOOTSTRAP),
        help=f"native listener (default {DEFAULT_BOOTSTRAP})",
    )
    _add_tls_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    topics = sub.add_parser("topics", help="create, list, describe, alter or delete topics")
    topic_cmds = topics.add_subparsers(dest="topics_command", required=True)
    create = topic_cmds.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    topic_cmds.add_parser("list", help="list topics and partition counts")
    add_topic_parsers(topic_cmds)

    produce = sub.add_parser("produce", help="append one record per stdin line")
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int, default=0)

    consume = sub.add_parser("consume", help="print one value per line")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, default=0)
    consume.add_argument(
        "--from",
        dest="start",
        type=_start,
        default="earliest",
        help="offset, earliest (default) or latest",
    )
    consume.add_argument("--count", type=int, default=None, help="stop after N records")
    consume.add_argument(
        "--follow", action="store_true", help="keep waiting for new records until interrupted"
    )
    add_groups_parser(sub)
    add_queue_parsers(sub)
    add_users_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "users":
        return run_users(args)
    target = _target(parser, args)
    host, port = target.host, target.port
    try:
        if args.command == "groups":
            with target.connect() as client:
                return run_groups(client, args, sys.stdout)
        if args.command == "share-groups":
            with target.connect() as client:
                return run_share_groups(client, args, sys.stdout)
        if args.command == "queue":
            with target.connect() as client:
                return run_queue(client, args, sys.stdout.buffer)
        if args.command == "topics":
            with target.connect() as client:
                if args.topics_command in TOPIC_OPERATOR_COMMANDS:
                    return run_topic_commands(client, args, sys.stdout)
                if args.topics_command == "create":
                    if has_collision_chars(args.name):
                        # Kafka's kafka-topics.sh warns the same way before creating.
                        print(f"brokerctl: warning: {COLLISION_WARNING}", file=sys.stderr)
                    client.create_topic(args.name, args.partitions)
                    print(f"created topic {args.name} with {args.partitions} partition(s)")
                else:
                    for entry in client.list_topics():
                        print(f"{entry.name}\t{entry.partitions}")
            return 0
        if args.command == "produce":
            return _produce(target, args.topic, args.partition, sys.stdin.buffer)
        return _consume(target, args, sys.stdout.buffer)
    except NativeError as e:
        print(f"brokerctl: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except ssl.SSLError as e:
        print(f"brokerctl: TLS with the broker at {host}:{port} failed: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except OSError as e:
        print(f"brokerctl: cannot reach the broker at {host}:{port}: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return 0


def _batches(stream: BinaryIO) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    size = 0
    for line in stream:
        value = line[:-1] if line.endswith(b"\n") else line
        batch.append(value)
        size += len(value) + 4
        if len(batch) >= PRODUCE_BATCH_LINES or size >= PRODUCE_BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _produce(target: Target, topic: str, partition: int, stream: BinaryIO) -> int:
    total = 0
    first: int | None = None
    with target.connect() as client:
        for batch in _batches(stream):
            base = client.produce(topic, partition, batch)
            first = base if first is None else first
            total += len(batch)
    if first is None:
        print("no records produced (empty input)", file=sys.stderr)
    else:
        print(
            f"produced {total} record(s) to {topic}/{partition} at offsets "
            f"{first}..{first + total - 1}",
            file=sys.stderr,
        )
    return 0


def _consume(target: Target, args: argparse.Namespace, out: BinaryIO) -> int:
    topic, partition = args.topic, args.partition
    remaining = args.count
    client = target.connect()
    try:
        start, end = client.list_offsets(topic, partition)
        offset = {"earliest": start, "latest": end}.get(args.start, args.start)
        assert isinstance(offset, int)
        while remaining is None or remaining > 0:
            if args.follow:
                try:
                    response = client.poll(topic, partition, offset, max_wait_ms=FOLLOW_WAIT_MS)
                except NativeError as e:
                    if e.code not in _RETRY_CODES:
                        raise
                    # The broker is stopping, or too many consumers wait: both pass, so
                    # back off (no tight retry loop) and carry on from the same offset.
                    client.close()
                    time.sleep(RECONNECT_SECONDS)
                    client = _reconnect(target)
                    continue
                except OSError:  # includes ConnectionError and TimeoutError
                    client.close()
                    client = _reconnect(target)
                    continue
                values = [r.value for r in response.records]
                if response.records:
                    offset = response.records[-1].offset + 1
            else:
                # Type 6 without waiting, not type 2: its records carry their offsets,
                # and a compacted topic has gaps (docs/protocol.md).
                response = client.poll(topic, partition, offset, max_wait_ms=0)
                if not response.records:
                    break
                values = [r.value for r in response.records]
                offset = response.records[-1].offset + 1
            if remaining is not None:
                values = values[:remaining]
                remaining -= len(values)
            for value in values:
                out.write((value or b"") + b"\n")  # a tombstone (null) prints empty
            out.flush()
    finally:
        client.close()
    return 0


def _reconnect(target: Target) -> NativeClient:
    """Wait for the broker to come back (``consume --follow`` survives restarts). A TLS
    failure is not waited out: the settings will not get better."""
    while True:
        try:
            return target.connect()
        except ssl.SSLError:
            raise
        except OSError:
            time.sleep(RECONNECT_SECONDS)


if __name__ == "__main__":
    sys.exit(main())
