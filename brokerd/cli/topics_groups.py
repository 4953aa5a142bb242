# -*- test-case-name: tests.cli.test_topics_groups -*-
"""``brokerctl``'s operator commands (``docs/operator.md``)::

    brokerctl topics describe NAME
    brokerctl topics alter NAME --config K=V [--config K=V ...]   (K= deletes the override)
    brokerctl topics delete NAME
    brokerctl topics add-partitions NAME --count N                (N more partitions)
    brokerctl groups list
    brokerctl groups describe GROUP
    brokerctl groups reset-offsets GROUP --topic T[:P,P...]
              (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO) [--dry-run]
    brokerctl groups delete GROUP

Each prints an aligned table (:mod:`brokerd.cli.tables`), or with ``--json`` the JSON
form of the broker's views (``brokerd.operator.views.to_json``) on one line. This module
builds the argument parsers and runs the commands over a
:class:`~brokerd.client.NativeClient`; the exit codes and connection errors are
:mod:`brokerd.cli.brokerctl`'s.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TextIO

from brokerd.cli.tables import emit, render_group, render_groups, render_resets, render_topic
from brokerd.client import JsonObject, NativeClient
from brokerd.native.operator_messages import JsonValue, ResetMode

__all__ = [
    "TOPIC_OPERATOR_COMMANDS",
    "add_groups_parser",
    "add_topic_parsers",
    "parse_datetime_ms",
    "run_groups",
    "run_topic_commands",
]

#: The ``topics`` subcommands this module runs (``create`` and ``list`` are brokerctl.py's).
TOPIC_OPERATOR_COMMANDS = frozenset({"describe", "alter", "delete", "add-partitions"})


def _config(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (or NAME= to delete), not {text!r}")
    return name, value


def _topic_partitions(text: str) -> tuple[str, tuple[int, ...]]:
    """``T`` (every partition) or ``T:0,2`` (kafka-consumer-groups' form)."""
    topic, sep, listed = text.partition(":")
    if not sep:
        return topic, ()
    try:
        partitions = tuple(int(p) for p in listed.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P..., not {text!r}") from None
    if not partitions or min(partitions) < 0:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P..., not {text!r}")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """An ISO 8601 date and time as milliseconds since the epoch; without a zone it is
    local time (as kafka-consumer-groups' ``--to-datetime``)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date and time (2024-05-01T12:00:00Z), not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time
    ms = int(moment.timestamp() * 1000)
    if ms < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is before 1970")
    return ms


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {text!r}")
    return int(text)


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, not 0")
    return value


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_topic_parsers(
    topic_cmds: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add ``describe``, ``alter``, ``delete`` and ``add-partitions`` under ``topics``."""
    describe = topic_cmds.add_parser("describe", help="partitions, offsets, sizes and configs")
    describe.add_argument("name")
    _json_flag(describe)
    alter = topic_cmds.add_parser("alter", help="set or delete config overrides")
    alter.add_argument("name")
    alter.add_argument(
        "--config",
        type=_config,
        action="append",
        required=True,
        metavar="NAME=VALUE",
        help="set an override; NAME= (empty value) deletes it (repeatable)",
    )
    _json_flag(alter)
    delete = topic_cmds.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("name")
    _json_flag(delete)
    grow = topic_cmds.add_parser("add-partitions", help="add partitions to a topic")
    grow.add_argument("name")
    grow.add_argument("--count", type=_positive, required=True, help="partitions to add")
    _json_flag(grow)


def add_groups_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``groups list|describe|reset-offsets|delete``."""
    groups = sub.add_parser("groups", help="inspect and manage consumer and share groups")
    cmds = groups.add_subparsers(dest="groups_command", required=True)
    listing = cmds.add_parser(
        "list", help="every group with its state, type (Classic, Consumer, Share) and lag"
    )
    _json_flag(listing)
    describe = cmds.add_parser(
        "describe",
        help="members, assignments, offsets and lag (a share group: start offsets and lag)",
    )
    describe.add_argument("group")
    _json_flag(describe)
    reset = cmds.add_parser(
        "reset-offsets", help="move an inactive group's committed offsets of a topic"
    )
    reset.add_argument("group")
    reset.add_argument(
        "--topic",
        type=_topic_partitions,
        required=True,
        metavar="TOPIC[:P,P...]",
        help="the topic (every partition, or the listed ones)",
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offsets")
    target.add_argument("--to-latest", action="store_true", help="the high watermarks")
    target.add_argument("--to-offset", type=_non_negative, metavar="N", help="offset N (clamped)")
    target.add_argument(
        "--to-datetime",
        type=parse_datetime_ms,
        metavar="ISO",
        help="the first offset at or after this time (latest if none)",
    )
    reset.add_argument(
        "--dry-run", action="store_true", help="show the new offsets, commit nothing"
    )
    _json_flag(reset)
    delete = cmds.add_parser("delete", help="delete an inactive group and its offsets")
    delete.add_argument("group")
    _json_flag(delete)


def _emit(out: TextIO, args: argparse.Namespace, document: JsonValue, lines: list[str]) -> int:
    return emit(out, args.json, document, lines)


def _partition_count(topic: JsonObject) -> int:
    partitions = topic.get("partitions")
    return len(partitions) if isinstance(partitions, list) else 0


def run_topic_commands(client: NativeClient, args: argparse.Namespace, out: TextIO) -> int:
    """Run ``topics describe|alter|delete|add-partitions``."""
    name: str = args.name
    command: str = args.topics_command
    if command == "describe":
        topic = client.describe_topic(name)
        return _emit(out, args, topic, render_topic(topic))
    if command == "alter":
        configs: list[tuple[str, str]] = args.config
        set_configs = {k: v for k, v in configs if v}
        delete = [k for k, v in configs if not v]
        topic = client.alter_topic_configs(name, set_configs, delete)
        changes = [f"{k}={v}" for k, v in set_configs.items()] + [f"{k} (default)" for k in delete]
        head = f"altered topic {name}: {', '.join(changes)}"
        return _emit(out, args, topic, [head, "", *render_topic(topic)])
    if command == "delete":
        client.delete_topic(name)
        return _emit(out, args, {"topic": name, "deleted": True}, [f"deleted topic {name}"])
    before = _partition_count(client.describe_topic(name))
    topic = client.create_partitions(name, before + args.count)
    head = f"topic {name}: {before} -> {_partition_count(topic)} partition(s)"
    return _emit(out, args, topic, [head])


def _reset_target(args: argparse.Namespace) -> tuple[ResetMode, int]:
    if args.to_earliest:
        return ResetMode.EARLIEST, 0
    if args.to_latest:
        return ResetMode.LATEST, 0
    if args.to_offset is not None:
        return ResetMode.OFFSET, int(args.to_offset)
    return ResetMode.DATETIME, int(args.to_datetime)


def run_groups(client: NativeClient, args: argparse.Namespace, out: TextIO) -> int:
    """Run ``groups list|describe|reset-offsets|delete``."""
    command: str = args.groups_command
    if command == "list":
        groups = client.list_groups()
        return _emit(out, args, list(groups), render_groups(groups))
    if command == "describe":
        group = client.describe_group(args.group)
        return _emit(out, args, group, render_group(group))
    if command == "reset-offsets":
        topic, partitions = args.topic
        mode, value = _reset_target(args)
        rows = client.reset_offsets(
            args.group, topic, mode, value, partitions=partitions, dry_run=args.dry_run
        )
        return _emit(out, args, list(rows), render_resets(rows, dry_run=args.dry_run))
    client.delete_group(args.group)
    document: JsonObject = {"group_id": args.group, "deleted": True}
    return _emit(out, args, document, [f"deleted group {args.group}"])
