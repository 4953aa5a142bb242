"""The table of native commands: one row per request type, agreeing with the decoders'
tables, and every row's ACL rule refusing a principal with no ACLs (listings excepted:
they are filtered instead)."""

from __future__ import annotations

import pytest

from brokerd.errors import AuthorizationFailed
from brokerd.native import operator_wire, queue_wire
from brokerd.native.acl_checks import NativeAccess
from brokerd.native.commands import COMMANDS, authorize
from brokerd.native.messages import RequestType
from brokerd.native.wire import REQUEST_LAYOUTS
from brokerd.security.acl import AclAuthorizer


def test_one_row_per_request_type() -> None:
    assert sorted(c.request_type for c in COMMANDS.values()) == sorted(RequestType)
    for message, command in COMMANDS.items():
        assert command.message is message
        layout = command.layout
        if layout is not None:
            assert layout.message is message
        else:
            framed = {**operator_wire.TYPE_OF_CLASS, **queue_wire.TYPE_OF_CLASS}
            assert framed[message] == command.request_type
    assert set(REQUEST_LAYOUTS) | set(operator_wire.TYPE_OF_CLASS.values()) | set(
        queue_wire.TYPE_OF_CLASS.values()
    ) == set(RequestType)


def test_only_the_waiting_requests_read_ahead() -> None:
    parks = {c.request_type for c in COMMANDS.values() if c.parks}
    assert parks == {RequestType.LONG_POLL_FETCH, RequestType.QUEUE_FETCH}


LISTINGS = {RequestType.LIST_TOPICS, RequestType.LIST_GROUPS, RequestType.LIST_SHARE_GROUPS}


@pytest.mark.parametrize("command", list(COMMANDS.values()), ids=lambda c: c.request_type.name)
def test_no_acl_no_request_but_the_listings(command: object) -> None:
    from brokerd.native.commands import NativeCommand

    assert isinstance(command, NativeCommand)
    nobody = NativeAccess(AclAuthorizer([], frozenset()), "User:nobody", "h", lambda: {"t"})
    fields = {"topic": "t", "group_id": "g"}
    request = object.__new__(command.message)
    for name in getattr(command.message, "__attrs_attrs__", ()):
        object.__setattr__(request, name.name, fields.get(name.name))
    if command.request_type in LISTINGS:
        authorize(nobody, request)
    else:
        with pytest.raises(AuthorizationFailed):
            authorize(nobody, request)


def test_an_unknown_message_is_refused() -> None:
    nobody = NativeAccess(AclAuthorizer([], frozenset()), "User:nobody", "h", lambda: set())
    with pytest.raises(AuthorizationFailed):
        authorize(nobody, object())
