# -*- test-case-name: tests.registry.test_http -*-
"""Confluent Schema Registry's REST API (``--schema-registry``), as its clients use it.

One leaf resource answers every path (docs/schema-registry.md has the table): subjects
and their versions, schemas by id, the compatibility levels (``/config``), the modes
(``/mode``), the compatibility test (``/compatibility``), and the small endpoints
clients probe (``/``, ``/schemas/types``, ``/contexts``, ``/v1/metadata/id``). Answers are
``application/vnd.schemaregistry.v1+json``; failures are ``{"error_code", "message"}``
with Confluent's codes. Request bodies are JSON (sent as Confluent's media types,
``application/json`` or ``application/octet-stream``), at most :data:`MAX_BODY_BYTES`:
a longer body is dropped as it arrives (never held) and answered 413.

Every request is authenticated as the ``--http-auth`` option says (Basic against the
``--credentials`` file, or the client certificate) and, under ``--authorizer acl``,
checked by :mod:`brokerd.registry.acl`. The registry itself
(:class:`~brokerd.registry.service.SchemaRegistry`) does the work; this module parses
requests, asks, and words answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Container, Mapping
from typing import Any, cast

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from brokerd.registry.acl import RegistryGate
from brokerd.registry.model import (
    Compatibility,
    Mode,
    RegisteredSchema,
    RegistryError,
    Schema,
    SchemaReference,
    SchemaType,
)
from brokerd.registry.service import SchemaRegistry, parse_version
from brokerd.security.acl import AclAuthorizer, Operation
from brokerd.security.doors import HttpAuth
from brokerd.web.auth import HttpIdentity

__all__ = ["CONTENT_TYPE", "MAX_BODY_BYTES", "RegistryResource", "make_registry_site"]

_log = Logger()

CONTENT_TYPE = b"application/vnd.schemaregistry.v1+json"
#: Largest request body taken (a schema with its references is far smaller).
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Longest path segment (a subject name) taken.
MAX_SUBJECT_CHARS = 4096
_MEDIA_TYPES = (
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
    "",
)
_SCHEMA_TYPES = ["JSON", "PROTOBUF", "AVRO"]

Answer = tuple[int, Any]
Handler = Callable[["_Call"], Awaitable[Answer]]


class _Raw:
    """An answer that is a schema's text itself (``.../schema`` endpoints)."""

    def __init__(self, text: str) -> None:
        self.text = text


class BoundedRequest(Request):
    """A request whose body is dropped once it passes :data:`MAX_BODY_BYTES` (Twisted
    would otherwise hold any length in memory)."""

    max_body = MAX_BODY_BYTES

    def gotLength(self, length: int | None) -> None:
        self.too_large = length is not None and length > self.max_body
        self._received = 0
        super().gotLength(None if self.too_large else length)

    def handleContentChunk(self, data: bytes) -> None:
        self._received += len(data)
        if self._received > self.max_body:
            self.too_large = True
        if not self.too_large:
            super().handleContentChunk(data)


def _flag(args: Mapping[bytes, list[bytes]], name: str) -> bool:
    values = args.get(name.encode())
    return values is not None and values[-1].decode("utf-8", "replace").lower() == "true"


def _arg(args: Mapping[bytes, list[bytes]], name: str) -> str | None:
    values = args.get(name.encode())
    return values[-1].decode("utf-8", "replace") if values else None


class _Call:
    """One request: its path segments, query, body and gate."""

    def __init__(self, request: Request, segments: list[str], gate: RegistryGate) -> None:
        self.request = request
        self.segments = segments
        self.args: Mapping[bytes, list[bytes]] = request.args or {}
        self.gate = gate

    def flag(self, name: str) -> bool:
        return _flag(self.args, name)

    def arg(self, name: str) -> str | None:
        return _arg(self.args, name)

    def body(self) -> dict[str, Any]:
        raw = self.request.content.read() if self.request.content is not None else b""
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            # RecursionError: nesting deeper than the interpreter's stack.
            raise RegistryError(400, 400, f"Unrecognized request body: {e}") from None
        if not isinstance(body, dict):
            raise RegistryError(400, 400, "Unrecognized request body: not a JSON object")
        return body


def _schema_of(body: Mapping[str, Any]) -> Schema:
    text = body.get("schema")
    if not isinstance(text, str):
        raise RegistryError(422, 42201, "Empty schema")
    type_name = body.get("schemaType") or "AVRO"
    try:
        schema_type = SchemaType(type_name)
    except ValueError:
        raise RegistryError(422, 42201, f"Invalid schema type {type_name!r}") from None
    refs = body.get("references") or []
    if not isinstance(refs, list):
        raise RegistryError(422, 42201, "Invalid schema: references must be a list")
    references = []
    for ref in refs:
        if not (isinstance(ref, dict) and isinstance(ref.get("name"), str)
                and isinstance(ref.get("subject"), str) and isinstance(ref.get("version"), int)):
            raise RegistryError(
                422, 42201, "Invalid schema: a reference needs name, subject and version"
            )
        references.append(SchemaReference(ref["name"], ref["subject"], ref["version"]))
    return Schema(schema_type, text, tuple(references))


def _schema_fields(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if schema.schema_type is not SchemaType.AVRO:
        out["schemaType"] = schema.schema_type.value
    if schema.references:
        out["references"] = [
            {"name": r.name, "subject": r.subject, "version": r.version}
            for r in schema.references
        ]
    return out


def _version_body(v: RegisteredSchema) -> dict[str, Any]:
    return {
        "subject": v.subject, "version": v.version, "id": v.schema_id,
        **_schema_fields(v.schema), "schema": v.schema.text,
    }


def _level(body: Mapping[str, Any]) -> Compatibility:
    value = body.get("compatibility", body.get("compatibilityLevel"))
    try:
        return Compatibility(str(value).upper())
    except ValueError:
        raise RegistryError(
            422, 42203, f"Invalid compatibility level. Valid values are none, backward, "
            f"forward, full, backward_transitive, forward_transitive, and "
            f"full_transitive (given {value!r})",
        ) from None


def _mode(body: Mapping[str, Any]) -> Mode:
    value = body.get("mode")
    try:
        return Mode(str(value).upper())
    except ValueError:
        raise RegistryError(
            422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY and IMPORT "
            f"(given {value!r})",
        ) from None


def _id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or not text.isdigit():
        raise RegistryError(404, 40403, f"Schema {text} not found")
    return value


class RegistryResource(Resource):
    """The REST API over ``registry`` (every path; see the module's doc)."""

    isLeaf = True

    def __init__(
        self,
        registry: SchemaRegistry,
        *,
        identity: HttpIdentity | None = None,
        authorizer: AclAuthorizer | None = None,
    ) -> None:
        super().__init__()
        self._registry = registry
        self._identity = identity or HttpIdentity(HttpAuth.NONE)
        self._authorizer = authorizer

    def render(self, request: Request) -> Any:
        request.setHeader(b"content-type", CONTENT_TYPE)
        request.setHeader(b"cache-control", b"no-store")
        if getattr(request, "too_large", False):
            return self._error(request, RegistryError(
                413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes"))
        if self._identity.refused(request):
            request.setHeader(b"retry-after", b"60")
            return self._error(request, RegistryError(
                429, 429, "Too many failed logins from this address; try again later"))
        principal = self._identity.principal(request)
        if principal is None:
            if self._identity.mode is HttpAuth.BASIC:
                request.setHeader(b"www-authenticate", b'Basic realm="brokerd"')
            return self._error(request, RegistryError(401, 401, "Unauthorized"))
        host = str(getattr(request.getClientAddress(), "host", ""))
        gate = RegistryGate(self._authorizer, principal, host)
        media = (request.getHeader(b"content-type") or b"").decode("latin-1")
        if request.method in (b"POST", b"PUT") and media.split(";")[0].strip().lower() \
                not in _MEDIA_TYPES:
            return self._error(request, RegistryError(
                415, 415, f"Unsupported media type {media!r}"))
        try:
            # Twisted has already split the path and unquoted each segment.
            segments = [s.decode("utf-8") for s in request.postpath or []]
        except UnicodeDecodeError:
            return self._error(request, RegistryError(404, 404, "HTTP 404 Not Found"))
        while segments and segments[-1] == "":
            segments.pop()
        if any(len(s) > MAX_SUBJECT_CHARS for s in segments):
            return self._error(request, RegistryError(404, 40401, "Subject name too long"))
        call = _Call(request, segments, gate)
        # A client that goes away does not cancel its request: a write it started is
        # carried out (and its answer dropped), as a registry cannot half-register.
        gone: list[bool] = []
        request.notifyFinish().addErrback(lambda _f: gone.append(True))
        d = defer.Deferred.fromCoroutine(self._dispatch(call))
        d.addCallbacks(self._answer, self._failed, callbackArgs=(request, gone),
                       errbackArgs=(request, gone))
        return NOT_DONE_YET

    async def _dispatch(self, call: _Call) -> Answer:
        handler = _route(call.request.method.decode("latin-1"), call.segments)
        if handler is None:
            raise RegistryError(404, 404, "HTTP 404 Not Found")
        method = getattr(self, handler)
        answer: Answer = await method(call)
        return answer

    def _answer(self, answer: Answer, request: Request, gone: list[bool]) -> None:
        if gone:  # the client went away: nobody to answer
            return
        status, body = answer
        request.setResponseCode(status)
        if isinstance(body, _Raw):
            request.write(body.text.encode("utf-8"))
        else:
            request.write(json.dumps(body).encode("utf-8"))
        request.finish()

    def _failed(self, failure: Failure, request: Request, gone: list[bool]) -> None:
        error = failure.value
        if not isinstance(error, RegistryError):
            # Unexpected: logged even when the client is gone.
            _log.failure("schema registry request {path}", failure,
                         path=request.path.decode("latin-1"))
            error = RegistryError(500, 50001, f"Error in the backend data store: {error}")
        if gone:
            return
        request.write(self._error(request, error))
        request.finish()

    @staticmethod
    def _error(request: Request, error: RegistryError) -> bytes:
        request.setResponseCode(error.http_status)
        return json.dumps({"error_code": error.error_code, "message": error.message}).encode()

    # -- small endpoints ---------------------------------------------------------------

    async def root(self, call: _Call) -> Answer:
        return 200, {}

    async def schema_types(self, call: _Call) -> Answer:
        return 200, _SCHEMA_TYPES

    async def contexts(self, call: _Call) -> Answer:
        return 200, ["."]

    async def metadata_id(self, call: _Call) -> Answer:
        return 200, {"scope": {"path": [], "clusters": {}}}

    # -- subjects ----------------------------------------------------------------------

    async def list_subjects(self, call: _Call) -> Answer:
        self._registry.check_ready()
        prefix = call.arg("subjectPrefix") or ""
        names = self._registry.subjects(deleted=call.flag("deleted"))
        return 200, [
            s for s in names
            if s.startswith(prefix) and call.gate.allows_subject(s, Operation.READ)
        ]

    async def lookup(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.READ)
        found = self._registry.find(
            subject, _schema_of(call.body()), normalize=call.flag("normalize"),
            deleted=call.flag("deleted"),
        )
        return self._version_answer(call, found)

    async def delete_subject(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.DELETE)
        self._registry.check_ready()
        return 200, await self._registry.delete_subject(subject,
                                                         permanent=call.flag("permanent"))

    async def list_versions(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.READ)
        self._registry.check_ready()
        versions = self._registry.versions(subject, deleted=call.flag("deleted"))
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return 200, [v.version for v in versions]

    async def register(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.WRITE)
        self._registry.check_ready()
        body = call.body()
        schema = _schema_of(body)
        given_id = body.get("id")
        given_version = body.get("version")
        registered = await self._registry.register_as(
            subject, schema, normalize=call.flag("normalize"),
            schema_id=given_id if isinstance(given_id, int) and given_id > 0 else None,
            version=given_version if isinstance(given_version, int)
            and given_version > 0 else None,
        )
        return 200, {"id": registered.schema_id}

    async def get_version(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.READ)
        found = self._registry.resolve_version(subject, call.segments[3],
                                               deleted=call.flag("deleted"))
        return self._version_answer(call, found)

    async def get_version_schema(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.READ)
        found = self._registry.resolve_version(subject, call.segments[3],
                                               deleted=call.flag("deleted"))
        return 200, _Raw(found.schema.text)

    async def referenced_by(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.READ)
        found = self._registry.resolve_version(subject, call.segments[3])
        return 200, self._registry.state.referenced_by(subject, found.version)

    async def delete_version(self, call: _Call) -> Answer:
        subject = call.segments[1]
        call.gate.subject(subject, Operation.DELETE)
        self._registry.check_ready()
        text = call.segments[3]
        if text not in ("latest", "-1"):
            parse_version(text)
        return 200, await self._registry.delete_version(
            subject, text, permanent=call.flag("permanent")
        )

    # -- schemas -----------------------------------------------------------------------

    def _readable_carriers(self, call: _Call, schema_id: int) -> list[RegisteredSchema]:
        self._registry.check_ready()
        carriers = self._registry.state.carriers(schema_id)
        if not carriers:
            raise RegistryError(404, 40403, f"Schema {schema_id} not found")
        readable = [c for c in carriers if call.gate.allows_subject(c.subject, Operation.READ)]
        if not readable:
            raise RegistryError(
                403, 40301, f"User {call.gate.principal} may READ no subject of schema "
                f"{schema_id}"
            )
        return readable

    async def schema_by_id(self, call: _Call) -> Answer:
        schema_id = _id(call.segments[2])
        self._readable_carriers(call, schema_id)
        schema = self._registry.schema_by_id(schema_id)
        assert schema is not None
        return 200, {**_schema_fields(schema), "schema": self._text(call, schema_id, schema)}

    def _text(self, call: _Call, schema_id: int, schema: Schema) -> str:
        """The schema's text, or with ``?format=serialized`` a Protobuf schema's base64
        ``FileDescriptorProto`` (what confluent-kafka's Protobuf serde asks for, when
        the format offers it: an optional ``serialized()`` of its parsed schema)."""
        if call.arg("format") == "serialized" and schema.schema_type is SchemaType.PROTOBUF:
            serialized = getattr(self._registry.parsed_by_id(schema_id), "serialized", None)
            if callable(serialized):
                return str(serialized())
        return schema.text

    def _version_answer(self, call: _Call, found: RegisteredSchema) -> Answer:
        body = _version_body(found)
        body["schema"] = self._text(call, found.schema_id, found.schema)
        return 200, body

    async def schema_text_by_id(self, call: _Call) -> Answer:
        schema_id = _id(call.segments[2])
        self._readable_carriers(call, schema_id)
        schema = self._registry.schema_by_id(schema_id)
        assert schema is not None
        return 200, _Raw(schema.text)

    async def schema_subjects(self, call: _Call) -> Answer:
        schema_id = _id(call.segments[2])
        carriers = self._readable_carriers(call, schema_id)
        deleted = call.flag("deleted")
        return 200, sorted({c.subject for c in carriers if deleted or not c.deleted})

    async def schema_versions(self, call: _Call) -> Answer:
        schema_id = _id(call.segments[2])
        carriers = self._readable_carriers(call, schema_id)
        deleted = call.flag("deleted")
        return 200, [
            {"subject": c.subject, "version": c.version}
            for c in carriers if deleted or not c.deleted
        ]

    async def list_schemas(self, call: _Call) -> Answer:
        self._registry.check_ready()
        prefix = call.arg("subjectPrefix") or ""
        deleted = call.flag("deleted")
        latest_only = call.flag("latestOnly")
        out = []
        for subject in self._registry.subjects(deleted=deleted):
            if not subject.startswith(prefix) or not call.gate.allows_subject(
                subject, Operation.READ
            ):
                continue
            versions = self._registry.versions(subject, deleted=deleted)
            for v in versions[-1:] if latest_only else versions:
                out.append(_version_body(v))
        return 200, out

    # -- config ------------------------------------------------------------------------

    def _config_gate(self, call: _Call, operation: Operation) -> str | None:
        subject = call.segments[1] if len(call.segments) > 1 else None
        if subject is None:
            call.gate.cluster(operation)
        else:
            call.gate.subject(subject, operation)
        self._registry.check_ready()
        return subject

    async def get_config(self, call: _Call) -> Answer:
        subject = self._config_gate(call, Operation.DESCRIBE_CONFIGS)
        state = self._registry.state
        _own_setting(call, subject, state.subject_compatibility, 40408, "compatibility")
        return 200, {"compatibilityLevel": state.compatibility_of(subject).value}

    async def put_config(self, call: _Call) -> Answer:
        subject = self._config_gate(call, Operation.ALTER_CONFIGS)
        level = _level(call.body())
        await self._registry.set_compatibility(subject, level)
        return 200, {"compatibility": level.value}

    async def delete_config(self, call: _Call) -> Answer:
        subject = self._config_gate(call, Operation.ALTER_CONFIGS)
        state = self._registry.state
        if subject is not None and subject not in state.subject_compatibility:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        previous = state.compatibility_of(subject)
        await self._registry.set_compatibility(subject, None)
        return 200, {"compatibilityLevel": previous.value}

    # -- mode --------------------------------------------------------------------------

    async def get_mode(self, call: _Call) -> Answer:
        subject = self._config_gate(call, Operation.DESCRIBE_CONFIGS)
        state = self._registry.state
        _own_setting(call, subject, state.subject_modes, 40409, "mode")
        return 200, {"mode": state.mode_of(subject).value}

    async def put_mode(self, call: _Call) -> Answer:
        subject = self._config_gate(call, Operation.ALTER_CONFIGS)
        mode = _mode(call.body())
        await self._registry.set_mode(subject, mode, force=call.flag("force"))
        return 200, {"mode": mode.value}

    async def delete_mode(self, call: _Call) -> Answer:
        subject = self._config_gate(call, Operation.ALTER_CONFIGS)
        state = self._registry.state
        if subject is None or subject not in state.subject_modes:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        previous = state.mode_of(subject)
        await self._registry.set_mode(subject, None, force=True)
        return 200, {"mode": previous.value}

    # -- compatibility -----------------------------------------------------------------

    async def test_compatibility(self, call: _Call) -> Answer:
        subject = call.segments[2]
        call.gate.subject(subject, Operation.READ)
        self._registry.check_ready()
        schema = _schema_of(call.body())
        version: int | None = None
        if len(call.segments) > 4:
            text = call.segments[4]
            if text in ("latest", "-1"):
                latest = self._registry.latest(subject)
                if latest is None:
                    if not self._registry.versions(subject, deleted=True):
                        raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
                    raise RegistryError(404, 40402, f"Version {text} not found.")
                version = latest.version
            else:
                version = parse_version(text)
                if not self._registry.versions(subject, deleted=True):
                    raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        messages = self._registry.check_compatibility(
            subject, schema, version, normalize=call.flag("normalize")
        )
        body: dict[str, Any] = {"is_compatible": not messages}
        if call.flag("verbose"):
            body["messages"] = messages
        return 200, body


#: (method, path pattern) -> handler name; ``*`` is one path segment.
_ROUTES: dict[tuple[str, tuple[str, ...]], str] = {
    ("GET", ()): "root",
    ("GET", ("schemas", "types")): "schema_types",
    ("GET", ("contexts",)): "contexts",
    ("GET", ("v1", "metadata", "id")): "metadata_id",
    ("GET", ("subjects",)): "list_subjects",
    ("POST", ("subjects", "*")): "lookup",
    ("DELETE", ("subjects", "*")): "delete_subject",
    ("GET", ("subjects", "*", "versions")): "list_versions",
    ("POST", ("subjects", "*", "versions")): "register",
    ("GET", ("subjects", "*", "versions", "*")): "get_version",
    ("DELETE", ("subjects", "*", "versions", "*")): "delete_version",
    ("GET", ("subjects", "*", "versions", "*", "schema")): "get_version_schema",
    ("GET", ("subjects", "*", "versions", "*", "referencedby")): "referenced_by",
    ("GET", ("schemas",)): "list_schemas",
    ("GET", ("schemas", "ids", "*")): "schema_by_id",
    ("GET", ("schemas", "ids", "*", "schema")): "schema_text_by_id",
    ("GET", ("schemas", "ids", "*", "subjects")): "schema_subjects",
    ("GET", ("schemas", "ids", "*", "versions")): "schema_versions",
    ("GET", ("config",)): "get_config",
    ("PUT", ("config",)): "put_config",
    ("DELETE", ("config",)): "delete_config",
    ("GET", ("config", "*")): "get_config",
    ("PUT", ("config", "*")): "put_config",
    ("DELETE", ("config", "*")): "delete_config",
    ("GET", ("mode",)): "get_mode",
    ("PUT", ("mode",)): "put_mode",
    ("GET", ("mode", "*")): "get_mode",
    ("PUT", ("mode", "*")): "put_mode",
    ("DELETE", ("mode", "*")): "delete_mode",
    ("POST", ("compatibility", "subjects", "*", "versions")): "test_compatibility",
    ("POST", ("compatibility", "subjects", "*", "versions", "*")): "test_compatibility",
}


def _route(method: str, segments: list[str]) -> str | None:
    for (m, pattern), handler in _ROUTES.items():
        if m != method or len(pattern) != len(segments):
            continue
        if all(p == "*" or p == s for p, s in zip(pattern, segments, strict=True)):
            return handler
    return None


def make_registry_site(
    registry: SchemaRegistry,
    *,
    identity: HttpIdentity | None = None,
    authorizer: AclAuthorizer | None = None,
) -> Site:
    """The ``--schema-registry`` listener's site: the API at the root path."""
    site = Site(cast(Any, RegistryResource(registry, identity=identity,
                                           authorizer=authorizer)))
    site.requestFactory = BoundedRequest
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    return site


def _own_setting(
    call: _Call, subject: str | None, configured: Container[str], code: int, what: str
) -> None:
    """A GET of a subject's compatibility or mode asks for the subject's own setting:
    404 (``code``) when it has none, unless ``defaultToGlobal`` takes the global one."""
    if subject is not None and subject not in configured and not call.flag("defaultToGlobal"):
        raise RegistryError(
            404, code, f"Subject '{subject}' does not have subject-level {what} configured"
        )
