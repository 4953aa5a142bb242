"""What consumer groups' and streams groups' stored records have in common.

Both keep a group as one JSON record with the same checking rules (every field's type
checked, a bool never taken for a number, every error a ValueError saying which kind of
record is wrong) and the same identity of a member: its member id, instance id, rack,
client id and host, rebalance timeout and member epochs. :class:`RecordFields` reads and
writes those once; each group type's ``persist`` module keeps the rest of its record.
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

__all__ = ["RecordFields", "StoredMember"]


class StoredMember(Protocol):
    @property
    def member_id(self) -> str: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_host(self) -> str: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def previous_member_epoch(self) -> int: ...


@attrs.frozen
class RecordFields:
    """The shared fields of one kind of record, named ``record`` in errors
    ("consumer group record")."""

    record: str

    def bad(self, why: str) -> ValueError:
        return ValueError(f"{self.record}: {why}")

    def load(self, data: bytes) -> object:
        """The JSON value of ``data``."""
        try:
            return json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise self.bad(str(e)) from None

    def get(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
        """``obj[key]`` if it is of ``kind`` (a bool is no int)."""
        value = obj.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.bad(f"{key!r} is not {kind}")
        return value

    @staticmethod
    def member_out(m: StoredMember) -> dict[str, object]:
        return {
            "id": m.member_id,
            "instance": m.instance_id,
            "rack": m.rack_id,
            "client": m.client_id,
            "host": m.client_host,
            "rebalance_ms": m.rebalance_timeout_ms,
            "epoch": m.member_epoch,
            "previous": m.previous_member_epoch,
        }

    def member_in(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The member's shared fields of ``raw``, as keyword arguments of its class."""
        return {
            "member_id": self.get(raw, "id", str),
            "instance_id": self.get(raw, "instance", (str, type(None))),
            "rack_id": self.get(raw, "rack", (str, type(None))),
            "client_id": self.get(raw, "client", str),
            "client_host": self.get(raw, "host", str),
            "rebalance_timeout_ms": self.get(raw, "rebalance_ms", int),
            "member_epoch": self.get(raw, "epoch", int),
            "previous_member_epoch": self.get(raw, "previous", int),
        }
