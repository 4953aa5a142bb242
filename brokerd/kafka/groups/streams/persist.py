"""A streams group's durable state, as bytes for the offsets journal (kept beside the
consumer-protocol groups' records: one namespace of group ids, opaque to the store).

What is kept is what Kafka keeps in its streams group records: the group and
assignment epochs, the topology, what its configuration found (the task counts and
whether it could run), each member (ids, client, rack, process, endpoint, client tags,
rebalance timeout, topology epoch, member epochs, reconciliation state, assigned and
revoking tasks) and the target assignment. Timers are not: a restored member gets a
fresh session. The topology is configured again against the topics on the next
heartbeat; the group epoch moves only if that changes the task counts.

The encoding is JSON with ``"type": "streams"`` (what tells it from a consumer group's
record, :func:`is_streams_record`), version 1. :func:`decode_group` checks every field's
type and refuses anything else with ValueError; the journal bounds the size. Pure.
"""

from __future__ import annotations

import json

from brokerd.kafka.groups.kip848.members import put_member
from brokerd.kafka.groups.kip848.records import RecordFields
from brokerd.kafka.groups.streams.state import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    Task,
    Tasks,
    task_map,
)
from brokerd.kafka.groups.streams.topology import (
    ConfiguredTopology,
    InternalTopic,
    Problem,
    Subtopology,
    Topology,
    TopologyStatus,
)

_TYPE = "streams"
_VERSION = 1
_FIELDS = RecordFields("streams group record")
_bad = _FIELDS.bad
_get = _FIELDS.get


def is_streams_record(data: bytes) -> bool:
    """Whether a stored group record is a streams group's."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(body, dict) and body.get("type") == _TYPE


def _tasks_out(tasks: frozenset[Task]) -> dict[str, list[int]]:
    return {s: sorted(ps) for s, ps in task_map(tasks).items()}


def _all_out(tasks: Tasks) -> dict[str, object]:
    return {"active": _tasks_out(tasks.active), "standby": _tasks_out(tasks.standby),
            "warmup": _tasks_out(tasks.warmup)}


def _internal_out(t: InternalTopic) -> list[object]:
    return [t.name, t.partitions, t.replication_factor, [list(kv) for kv in t.configs]]


def _topology_out(topology: Topology | None) -> object:
    if topology is None:
        return None
    return {"epoch": topology.epoch, "subtopologies": [
        {
            "id": s.subtopology_id,
            "sources": list(s.source_topics),
            "regexes": list(s.source_regexes),
            "changelogs": [_internal_out(t) for t in s.changelog_topics],
            "sinks": list(s.repartition_sinks),
            "repartitions": [_internal_out(t) for t in s.repartition_sources],
            "copartition": [sorted(g) for g in s.copartition_groups],
        }
        for s in topology.subtopologies
    ]}


def encode_group(group: StreamsGroup) -> bytes:
    configured = group.configured
    body = {
        "type": _TYPE,
        "v": _VERSION,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "topology": _topology_out(group.topology),
        "configured": None if configured is None else {
            "tasks": dict(sorted(configured.task_counts.items())),
            "ready": configured.ready,
        },
        "members": [
            {
                **RecordFields.member_out(m), "topology_epoch": m.topology_epoch,
                "process": m.process_id,
                "endpoint": None if m.user_endpoint is None else list(m.user_endpoint),
                "tags": [list(kv) for kv in m.client_tags],
                "state": m.state.value,
                "assigned": _all_out(m.assigned), "revoking": _all_out(m.revoking),
            }
            for _, m in sorted(group.members.items())
        ],
        "target": {m: _all_out(t) for m, t in sorted(group.target.items())},
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad("a number is not an integer")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise _bad("a name is not a string")
    return value


def _pairs(raw: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list):
        raise _bad("pairs are not a list")
    out = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise _bad("a pair is not two strings")
        out.append((_str(pair[0]), _str(pair[1])))
    return tuple(out)


def _tasks_in(raw: object) -> frozenset[Task]:
    if not isinstance(raw, dict):
        raise _bad("tasks are not an object")
    out: set[Task] = set()
    for s, ps in raw.items():
        if not isinstance(ps, list):
            raise _bad("task partitions are not a list")
        out.update((s, _int(p)) for p in ps)
    return frozenset(out)


def _all_in(raw: object) -> Tasks:
    if not isinstance(raw, dict):
        raise _bad("an assignment is not an object")
    return Tasks(_tasks_in(raw.get("active")), _tasks_in(raw.get("standby")),
                 _tasks_in(raw.get("warmup")))


def _internal_in(raw: object) -> InternalTopic:
    if not (isinstance(raw, list) and len(raw) == 4):
        raise _bad("an internal topic is not [name, partitions, replication, configs]")
    return InternalTopic(_str(raw[0]), _int(raw[1]), _int(raw[2]), _pairs(raw[3]))


def _names(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise _bad("names are not a list")
    return tuple(_str(n) for n in raw)


def _topology_in(raw: object) -> Topology | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad("the topology is not an object")
    subtopologies = []
    for s in _get(raw, "subtopologies", list):
        if not isinstance(s, dict):
            raise _bad("a subtopology is not an object")
        subtopologies.append(Subtopology(
            _get(s, "id", str),
            _names(s.get("sources")),
            _names(s.get("regexes")),
            tuple(_internal_in(t) for t in _get(s, "changelogs", list)),
            _names(s.get("sinks")),
            tuple(_internal_in(t) for t in _get(s, "repartitions", list)),
            tuple(frozenset(_names(g)) for g in _get(s, "copartition", list)),
        ))
    return Topology(_get(raw, "epoch", int), tuple(subtopologies))


def _configured_in(raw: object) -> ConfiguredTopology | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad("the configuration is not an object")
    tasks = {_str(s): _int(n) for s, n in _get(raw, "tasks", dict).items()}
    # The problems themselves are found again by the next heartbeat's configuration.
    problems = () if _get(raw, "ready", bool) else (
        Problem(TopologyStatus.MISSING_INTERNAL_TOPICS, "Not configured since the restart."),)
    return ConfiguredTopology(tasks, problems)


def decode_group(group_id: str, data: bytes) -> StreamsGroup:
    """The group stored as ``data``; ValueError if it is not a record this writes."""
    body = _FIELDS.load(data)
    if not isinstance(body, dict) or body.get("type") != _TYPE or body.get("v") != _VERSION:
        raise _bad("unknown type or version")
    group = StreamsGroup(
        group_id,
        group_epoch=_get(body, "group_epoch", int),
        assignment_epoch=_get(body, "assignment_epoch", int),
        topology=_topology_in(body.get("topology")),
        configured=_configured_in(body.get("configured")),
    )
    for raw in _get(body, "members", list):
        if not isinstance(raw, dict):
            raise _bad("a member is not an object")
        endpoint = raw.get("endpoint")
        if endpoint is not None and not (
            isinstance(endpoint, list) and len(endpoint) == 2
        ):
            raise _bad("an endpoint is not [host, port]")
        member = StreamsMember(
            **_FIELDS.member_in(raw),
            topology_epoch=_get(raw, "topology_epoch", int),
            process_id=_get(raw, "process", str),
            user_endpoint=None if endpoint is None else (_str(endpoint[0]), _int(endpoint[1])),
            client_tags=_pairs(raw.get("tags")),
            state=MemberState(_get(raw, "state", str)),
            assigned=_all_in(raw.get("assigned")),
            revoking=_all_in(raw.get("revoking")),
        )
        put_member(group, member)
    for member_id, target in _get(body, "target", dict).items():
        group.target[member_id] = _all_in(target)
    return group


__all__ = ["decode_group", "encode_group", "is_streams_record"]
