"""A consumer-protocol group's durable state, as bytes for the offsets journal (its
consumer group records, opaque to the store).

What is kept is what Kafka keeps in its group records: the group epoch, the assignment
epoch and assignor, the subscribed topics' metadata, each member (ids, client, rack,
subscriptions, rebalance timeout, member epochs, reconciliation state, assigned and
pending-revocation partitions; for a member speaking the classic protocol its session
timeout and protocols) and the target assignment. Timers are not: a restored
member gets a fresh session, then heartbeats on or is fenced when it runs out.

The encoding is JSON (topic IDs as text, protocol metadata as base64), version 1 (a
member without "classic" is a consumer-protocol member). :func:`decode_group` checks every
field's type and refuses anything else with ValueError; the journal bounds the size.
Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid

from brokerd.kafka.groups.consumer.assignors import ASSIGNORS, Assignment
from brokerd.kafka.groups.consumer.state import (
    ClassicProtocol,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from brokerd.kafka.groups.kip848.members import put_member
from brokerd.kafka.groups.kip848.records import RecordFields

_VERSION = 1
_FIELDS = RecordFields("consumer group record")
_get = _FIELDS.get


def _assignment_out(a: Assignment) -> dict[str, list[int]]:
    return {str(t): sorted(ps) for t, ps in sorted(a.items(), key=lambda i: str(i[0])) if ps}


def _classic_out(classic: ClassicProtocol | None) -> dict[str, object]:
    if classic is None:
        return {}
    return {"classic": {
        "session_ms": classic.session_timeout_ms,
        "protocols": [[n, base64.b64encode(md).decode()] for n, md in classic.protocols],
    }}


def _classic_in(raw: object) -> ClassicProtocol | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _FIELDS.bad("a classic member is not an object")
    protocols = []
    for pair in _get(raw, "protocols", list):
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, str) for x in pair)):
            raise _FIELDS.bad("bad classic protocol")
        try:
            protocols.append((pair[0], base64.b64decode(pair[1], validate=True)))
        except binascii.Error:
            raise _FIELDS.bad("bad classic metadata") from None
    return ClassicProtocol(_get(raw, "session_ms", int), tuple(protocols))


def encode_group(group: ConsumerGroup) -> bytes:
    members = [
        {
            **_FIELDS.member_out(m),
            "names": list(m.subscribed_topic_names),
            "regex": m.subscribed_topic_regex,
            "assignor": m.server_assignor,
            "state": m.state.value,
            "assigned": _assignment_out(m.assigned),
            "revoking": _assignment_out(m.pending_revocation),
            **_classic_out(m.classic),
        }
        for _, m in sorted(group.members.items())
    ]
    body = {
        "v": _VERSION,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor": group.assignor,
        "metadata": {n: [str(t), c] for n, (t, c) in sorted(group.subscribed_metadata.items())},
        "members": members,
        "target": {m: _assignment_out(a) for m, a in sorted(group.target.items())},
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _assignment_in(raw: object) -> dict[uuid.UUID, frozenset[int]]:
    if not isinstance(raw, dict):
        raise _FIELDS.bad("an assignment is not an object")
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise _FIELDS.bad("bad partitions")
        out[uuid.UUID(topic)] = frozenset(parts)
    return out


def decode_group(group_id: str, data: bytes) -> ConsumerGroup:
    """The group stored as ``data``; ValueError if it is not a record this writes."""
    body = _FIELDS.load(data)
    if not isinstance(body, dict) or body.get("v") != _VERSION:
        raise _FIELDS.bad("unknown version")
    assignor = _get(body, "assignor", str)
    if assignor not in ASSIGNORS:
        raise _FIELDS.bad(f"unknown assignor {assignor!r}")
    group = ConsumerGroup(
        group_id,
        group_epoch=_get(body, "group_epoch", int),
        assignment_epoch=_get(body, "assignment_epoch", int),
        assignor=assignor,
    )
    for name, pair in _get(body, "metadata", dict).items():
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], int)):
            raise _FIELDS.bad("bad topic metadata")
        group.subscribed_metadata[name] = (uuid.UUID(pair[0]), pair[1])
    for raw in _get(body, "members", list):
        if not isinstance(raw, dict):
            raise _FIELDS.bad("a member is not an object")
        names = _get(raw, "names", list)
        if not all(isinstance(n, str) for n in names):
            raise _FIELDS.bad("bad topic names")
        member = ConsumerMember(
            **_FIELDS.member_in(raw),
            subscribed_topic_names=tuple(names),
            subscribed_topic_regex=_get(raw, "regex", (str, type(None))),
            server_assignor=_get(raw, "assignor", (str, type(None))),
            state=MemberState(_get(raw, "state", str)),
            assigned=_assignment_in(raw.get("assigned")),
            pending_revocation=_assignment_in(raw.get("revoking")),
            classic=_classic_in(raw.get("classic")),
        )
        put_member(group, member)
    for member_id, raw_target in _get(body, "target", dict).items():
        group.target[member_id] = _assignment_in(raw_target)
    return group


__all__ = ["decode_group", "encode_group"]
