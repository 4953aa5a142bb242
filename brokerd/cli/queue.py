# -*- test-case-name: tests.cli.test_queue -*-
"""``brokerctl queue work`` and ``brokerctl share-groups list|describe``.

``queue work GROUP TOPIC`` is a worker of a share group on one partition: it acquires
records (QueueFetch), handles each, and acknowledges them (QueueAcknowledge), one
request per fetched batch. Handling a record:

- without ``--exec``: print its value on a line of stdout (``--print-offsets`` puts the
  offset and delivery count in front, tab-separated) and ACCEPT it;
- with ``--exec CMD``: run ``CMD`` through the shell with the value on its stdin and
  ``BROKERD_TOPIC``, ``BROKERD_PARTITION``, ``BROKERD_OFFSET``, ``BROKERD_DELIVERY_COUNT``
  and ``BROKERD_KEY`` in its environment; its exit status decides: 0 ACCEPT (done), 65
  (``EX_DATAERR``: the record itself is bad) REJECT (archived, never redelivered), any
  other status or a signal RELEASE (redelivered later, with a higher delivery count,
  until the group's ``share.delivery.count.limit`` archives it).

It stops after ``--max-records`` records, or when nothing arrived for ``--timeout``
seconds, or on Ctrl-C; records it holds but has not acknowledged are released then
(closing the connection releases them too). ``share-groups`` prints the figures of the
share-group views (``brokerd.operator.share_groups``) as tables, or ``--json``.

What it does not do: join a Kafka share group (a native worker is its own member,
``docs/queues.md``) or reconnect.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import BinaryIO, TextIO

from brokerd.cli.tables import emit, render_share_group, render_share_groups
from brokerd.client import NativeClient
from brokerd.native.queue_messages import MAX_QUEUE_RECORDS, AckKind, QueueRecord

__all__ = [
    "EXIT_REJECT",
    "ack_ranges",
    "add_queue_parsers",
    "kind_of_status",
    "run_queue",
    "run_share_groups",
]

#: ``--exec`` exit status that rejects the record (sysexits' EX_DATAERR).
EXIT_REJECT = 65
#: Longest wait of one fetch: also how often ``--timeout`` is looked at.
FETCH_WAIT_MS = 1000


def add_queue_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``queue work`` and ``share-groups list|describe``."""
    queue = sub.add_parser("queue", help="work through a share group's records")
    cmds = queue.add_subparsers(dest="queue_command", required=True)
    work = cmds.add_parser("work", help="acquire, handle and acknowledge records")
    work.add_argument("group")
    work.add_argument("topic")
    work.add_argument("--partition", type=int, default=0)
    work.add_argument(
        "--batch", type=int, default=100, help=f"records per fetch (1..{MAX_QUEUE_RECORDS})"
    )
    work.add_argument("--max-records", type=int, default=None, help="stop after N records")
    work.add_argument(
        "--timeout", type=float, default=None,
        help="stop when no record arrived for this many seconds after the last was handled",
    )
    work.add_argument(
        "--exec", dest="exec_command", default=None, metavar="CMD",
        help="run CMD per record (value on stdin): exit 0 accepts, 65 rejects, "
        "anything else releases",
    )
    work.add_argument(
        "--print-offsets", action="store_true",
        help="print offset and delivery count before each value",
    )
    groups = sub.add_parser("share-groups", help="inspect share groups (queues)")
    group_cmds = groups.add_subparsers(dest="share_groups_command", required=True)
    listing = group_cmds.add_parser("list", help="every share group with its figures")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    describe = group_cmds.add_parser("describe", help="figures per partition")
    describe.add_argument("group")
    describe.add_argument("--json", action="store_true", help="print JSON for scripts")


def run_share_groups(client: NativeClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.share_groups_command == "list":
        groups = client.list_share_groups()
        document: object = groups
        lines = render_share_groups(groups)
    else:
        group = client.describe_share_group(args.group)
        document, lines = group, render_share_group(group)
    return emit(out, args.json, document, lines)


def kind_of_status(status: int) -> AckKind:
    """What an ``--exec`` command's exit status (negative: killed by a signal) asks."""
    if status == 0:
        return AckKind.ACCEPT
    if status == EXIT_REJECT:
        return AckKind.REJECT
    return AckKind.RELEASE


def ack_ranges(verdicts: Sequence[tuple[int, AckKind]]) -> list[tuple[int, int, AckKind]]:
    """Offsets with their kinds, as few ``(first, last, kind)`` ranges as keep each
    offset's kind (consecutive offsets of one kind form one range)."""
    out: list[tuple[int, int, AckKind]] = []
    for offset, kind in sorted(verdicts):
        if out and out[-1][1] + 1 == offset and out[-1][2] is kind:
            out[-1] = (out[-1][0], offset, kind)
        else:
            out.append((offset, offset, kind))
    return out


def _run_command(command: str, args: argparse.Namespace, record: QueueRecord) -> AckKind:
    env = {
        **os.environ,
        "BROKERD_TOPIC": args.topic,
        "BROKERD_PARTITION": str(args.partition),
        "BROKERD_OFFSET": str(record.offset),
        "BROKERD_DELIVERY_COUNT": str(record.delivery_count),
        "BROKERD_KEY": record.key.decode("utf-8", "replace"),
    }
    done = subprocess.run(command, shell=True, input=record.value, env=env, check=False)
    return kind_of_status(done.returncode)


def _handle(args: argparse.Namespace, record: QueueRecord, out: BinaryIO) -> AckKind:
    if args.exec_command is not None:
        return _run_command(args.exec_command, args, record)
    head = f"{record.offset}\t{record.delivery_count}\t".encode() if args.print_offsets else b""
    out.write(head + record.value + b"\n")
    return AckKind.ACCEPT


def run_queue(
    client: NativeClient, args: argparse.Namespace, out: BinaryIO, *,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """``queue work``: see the module docstring. Returns 0 when it stops as asked."""
    now = clock
    batch = max(1, min(args.batch, MAX_QUEUE_RECORDS))
    handled = 0
    last_record = now()
    while args.max_records is None or handled < args.max_records:
        wait_ms = FETCH_WAIT_MS
        if args.timeout is not None:
            left = args.timeout - (now() - last_record)
            if left <= 0:
                break
            wait_ms = max(0, min(wait_ms, int(left * 1000)))
        want = batch if args.max_records is None else min(batch, args.max_records - handled)
        records = client.queue_fetch(
            args.group, args.topic, args.partition, max_records=want, max_wait_ms=wait_ms
        )
        if not records:
            continue
        verdicts: list[tuple[int, AckKind]] = []
        try:
            for record in records:
                verdicts.append((record.offset, _handle(args, record, out)))
            out.flush()
        finally:
            # Records handled get their verdicts; those not reached go back at once.
            seen = {o for o, _ in verdicts}
            verdicts += [(r.offset, AckKind.RELEASE) for r in records if r.offset not in seen]
            client.queue_acknowledge(args.group, args.topic, args.partition,
                                     ack_ranges(verdicts))
        # Idle time counts from here: a slow handler is not a quiet queue.
        last_record = now()
        handled += len(records)
    return 0
