"""brokerd/core/api over brokerd/core/roles: the core's one face. The Broker has every
method of it with the same parameters, each role's part every method of the role (declared once: no
forwarders), the long-poll primitive is exported from it, and no typing Protocol
outside the core restates one of its methods (the rule the face exists for: each method
of the core declared once)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import brokerd
from brokerd.core import api, roles
from brokerd.core.api import CoreApi
from brokerd.core.broker import Broker
from brokerd.core.fetcher import Fetcher
from brokerd.core.roles import long_poll
from brokerd.core.services import LogDirectoryService
from brokerd.core.topics import TopicRegistry
from brokerd.core.txn_markers import TxnMarkers
from brokerd.core.waiters import WaiterRegistry

PACKAGE = Path(brokerd.__file__).resolve().parent
#: Where the face and its roles are declared.
API_SOURCES = (PACKAGE / "core" / "api" / "__init__.py", PACKAGE / "core" / "roles" / "__init__.py")


def face_members() -> dict[str, object]:
    """Every member the roles of :class:`CoreApi` declare, by name."""
    found: dict[str, object] = {}
    for cls in CoreApi.__mro__:
        if cls.__module__ not in (api.__name__, roles.__name__):
            continue
        for name, value in vars(cls).items():
            if not name.startswith("_"):
                found[name] = value
    return found


def parameters(f: object) -> list[tuple[str, object, bool]]:
    """Name, kind and whether it has a default, for each parameter but ``self``."""
    sig = inspect.signature(f)  # type: ignore[arg-type]
    return [
        (p.name, p.kind, p.default is not inspect.Parameter.empty)
        for p in list(sig.parameters.values())[1:]
    ]


#: The part of the broker playing each role the face declares as a property, and the
#: role's Protocol.
ROLES: dict[str, tuple[type, type]] = {
    "topic_registry": (TopicRegistry, api.CoreTopics),
    "reads": (Fetcher, api.CoreReads),
    "transactions": (TxnMarkers, api.CoreTransactions),
    "storage": (LogDirectoryService, api.CoreLogDir),
    "waiters": (WaiterRegistry, api.CoreAppendWatches),
}


def role_members(role: type) -> dict[str, object]:
    return {name: value for name, value in vars(role).items() if not name.startswith("_")}


def test_the_face_has_the_methods_outside_code_calls() -> None:
    members = face_members()
    for name in ("topic_registry", "create_topic", "produce_batches", "wait_for_data",
                 "reads", "transactions", "storage", "waiters", "share"):
        assert name in members
    assert "topics" in role_members(api.CoreTopics)
    assert "read" in role_members(api.CoreReads)
    assert "write_txn_markers" in role_members(api.CoreTransactions)
    assert "describe_log_dirs" in role_members(api.CoreLogDir)
    assert "watch" in role_members(api.CoreAppendWatches)


def test_each_operation_is_declared_once() -> None:
    # A role's operations are the part's, reached through the role: neither the face
    # itself nor the broker declares them again (no forwarders).
    members = face_members()
    for role, (_part, protocol) in ROLES.items():
        for name in role_members(protocol):
            assert name not in members, f"{name} is declared by the face and by {role}"
            assert getattr(Broker, name, None) is None, f"Broker forwards {role}.{name}"


def test_broker_has_every_member_with_the_same_parameters() -> None:
    for name, declared in face_members().items():
        if name in ROLES or name in ("share", "after_answer"):
            continue  # the parts the broker holds (instance attributes)
        implemented = getattr(Broker, name, None)
        assert implemented is not None, f"Broker has no {name}"
        if isinstance(declared, property):
            assert isinstance(implemented, property), name
            continue
        assert parameters(implemented) == parameters(declared), name


def test_each_part_plays_its_role_with_the_same_parameters() -> None:
    for part, protocol in ROLES.values():
        for name, declared in role_members(protocol).items():
            implemented = getattr(part, name, None)
            assert implemented is not None, f"{part.__name__} has no {name}"
            if isinstance(declared, property):
                assert isinstance(implemented, property), name
                continue
            assert parameters(implemented) == parameters(declared), name


def test_long_poll_is_part_of_the_face() -> None:
    assert api.long_poll is long_poll.long_poll
    assert api.Shortfall is long_poll.Shortfall
    assert {"long_poll", "Shortfall"} <= set(api.__all__)


def _protocol_methods(source: str) -> dict[tuple[str, str], str]:
    """``{(class, method): signature text}`` of every ``Protocol`` class in ``source``;
    the signature text is the parameters and return annotation as written, less module
    qualifiers."""
    found: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(ast.unparse(b).endswith("Protocol") for b in node.bases):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                returns = ast.unparse(item.returns) if item.returns else "None"
                text = f"({ast.unparse(item.args)}) -> {returns}"
                # ``defer.Deferred`` and ``Deferred`` are one type: compare without the
                # module a name was reached through.
                found[(node.name, item.name)] = re.sub(r"\b[a-z_]+\.(?=[A-Z])", "", text)
    return found


def the_face() -> dict[str, str]:
    """``{method: signature text}`` of the face, as its roles declare it."""
    return {
        name: text
        for source in API_SOURCES
        for (_, name), text in _protocol_methods(source.read_text()).items()
    }


def restated(face: dict[str, str], source: str) -> list[str]:
    """The methods of ``source``'s Protocols declared as the face declares them."""
    return [
        f"{cls}.{name}"
        for (cls, name), text in _protocol_methods(source).items()
        if face.get(name) == text
    ]


def test_finder_sees_a_restated_method() -> None:
    source = (
        "from typing import Protocol\n"
        "class Mine(Protocol):\n"
        "    def delete_topic(self, name: str) -> Deferred[None]: ...\n"
        "    def topics(self) -> list[str]: ...\n"  # another object's topics()
        "class NotAProtocol:\n"
        "    def delete_topic(self, name: str) -> Deferred[None]: ...\n"
    )
    assert restated(the_face(), source) == ["Mine.delete_topic"]


def test_no_protocol_outside_the_core_restates_the_face() -> None:
    # The core's own Protocols (core/interfaces.py: what the core needs of storage) name
    # storage's methods, some of which share a name with the face's.
    face = the_face()
    core = PACKAGE / "core"
    found = [
        f"{path.relative_to(PACKAGE)}: {hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(core)
        for hit in restated(face, path.read_text())
    ]
    assert found == []
