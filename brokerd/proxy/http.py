# -*- test-case-name: tests.proxy.test_http, tests.proxy.test_site_broker -*-
"""The ``--http-proxy`` listener's HTTP side: bounded request bodies, who is asking,
routing to the v2 and v3 handlers, and JSON answers.

A request body is bounded before it is kept: a Content-Length beyond
:data:`~brokerd.proxy.limits.MAX_BODY_BYTES` (or a chunked body growing past it) is
read and dropped, and answered 413 (error code 413) without reaching a handler. The
principal is the ``--http-auth`` one (:class:`~brokerd.web.auth.HttpIdentity`): a
request that did not authenticate is answered 401 (40101); with ``--authorizer acl``
the handlers check its ACLs (:mod:`brokerd.proxy.access`).

Handlers are coroutines returning an :class:`Answer` or raising
:class:`~brokerd.proxy.errors.ProxyError`; anything else they raise is logged and
answered 500 (50001) without its text. What this module does not do: know any
endpoint's meaning.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import attrs
from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from brokerd.net.connlimit import ConnectionLimit
from brokerd.net.twisted_state import request_gone
from brokerd.proxy.access import Access
from brokerd.proxy.errors import (
    KAFKA_ERROR,
    NOT_FOUND,
    TOO_LARGE,
    UNAUTHORIZED,
    ProxyError,
    bad_request,
)
from brokerd.proxy.limits import ProxyLimits
from brokerd.security.acl import AclAuthorizer
from brokerd.web.auth import REALM, HttpIdentity

_log = Logger()

#: JSON nesting a request body may have (deeper is refused before parsing recurses).
_MAX_JSON_DEPTH = 64


@attrs.frozen
class Call:
    """One request, as handlers see it."""

    method: str
    path: tuple[str, ...]
    query: Mapping[str, str]
    body: bytes
    content_type: str | None
    accept: str | None
    access: Access
    #: ``scheme://host[:port]`` as the client addressed the proxy (its Host header).
    base_url: str
    address: str

    def json(self) -> Any:
        """The body as JSON (an empty body is ``{}``); bad JSON is 422."""
        if not self.body.strip():
            return {}
        return parse_json(self.body)


def parse_json(data: bytes) -> Any:
    if too_deep(data):
        raise bad_request(f"JSON nested deeper than {_MAX_JSON_DEPTH} levels")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProxyError(400, 400, f"the body is not JSON: {e}") from None


def too_deep(data: bytes) -> bool:
    # A cheap upper bound of the nesting: brackets open at once, strings ignored.
    depth = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > _MAX_JSON_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


@attrs.frozen
class Answer:
    """A handler's answer: a JSON value (or raw bytes), its status and content type."""

    body: object = None
    status: int = 200
    content_type: str = "application/vnd.kafka.v2+json"
    raw: bytes | None = None


Handler = Callable[..., Awaitable[Answer]]


@attrs.frozen
class Route:
    """``method`` and a path pattern whose ``{name}`` segments become arguments."""

    method: str
    pattern: str
    handler: Handler
    regex: re.Pattern[str] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        parts = [
            f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p)
            for p in self.pattern.strip("/").split("/")
        ]
        object.__setattr__(self, "regex", re.compile("^" + "/".join(parts) + "$"))


def bounded_request(limit: int) -> type[Request]:
    """A Request class that keeps at most ``limit`` body bytes, marking a larger body."""

    class BoundedRequest(Request):
        _parsePOSTFormSubmission = False
        body_too_large = False
        _received = 0

        def gotLength(self, length: int | None) -> None:
            self.body_too_large = length is not None and length > limit
            self._received = 0
            self.content = io.BytesIO()

        def handleContentChunk(self, data: bytes) -> None:
            self._received += len(data)
            if self._received > limit:
                self.body_too_large = True
            if not self.body_too_large and self.content is not None:
                self.content.write(data)

    return BoundedRequest


class ProxyResource(Resource):
    """Every path of the proxy: authenticates, routes, answers."""

    isLeaf = True

    def __init__(
        self,
        routes: Sequence[Route],
        *,
        identity: HttpIdentity,
        authorizer: AclAuthorizer | None,
        limits: ProxyLimits,
        scheme: str = "http",
    ) -> None:
        super().__init__()
        self._routes = list(routes)
        self._identity = identity
        self._authorizer = authorizer
        self._limits = limits
        self._scheme = scheme

    def render(self, request: Request) -> Any:
        d = Deferred.fromCoroutine(self._serve(request))
        d.addErrback(self._crashed, request)
        finished = request.notifyFinish()
        # A client that goes away cancels its long-polling records call.
        finished.addErrback(lambda _f: d.cancel())
        return NOT_DONE_YET

    async def _serve(self, request: Request) -> None:
        try:
            answer = await self._answer(request)
        except ProxyError as e:
            answer = Answer(e.body(), status=e.http_status, content_type=_error_type(request))
            if e.http_status == 401 and self._identity.mode.value == "basic":
                request.setHeader(b"www-authenticate", REALM)
        except CancelledError:
            return
        _write(request, answer)

    async def _answer(self, request: Request) -> Answer:
        if getattr(request, "body_too_large", False):
            raise ProxyError(413, TOO_LARGE,
                             f"the request body is larger than {self._limits.max_body_bytes} "
                             "bytes")
        if self._identity.refused(request):
            raise ProxyError(429, 42901, "too many failed logins from this address")
        principal = self._identity.principal(request)
        if principal is None:
            raise ProxyError(401, UNAUTHORIZED, "authentication required (--http-auth)")
        address = str(getattr(request.getClientAddress(), "host", ""))
        method = request.method.decode("ascii", "replace").upper()
        raw_path = request.path.decode("utf-8", "replace")
        segments = tuple(unquote(s) for s in raw_path.strip("/").split("/") if s)
        joined = "/".join(s.replace("/", "%2F") for s in segments)
        known_path = False
        for route in self._routes:
            match = route.regex.match(joined)
            if match is None:
                continue
            known_path = True
            if route.method != method:
                continue
            params = {k: v.replace("%2F", "/") for k, v in match.groupdict().items()}
            call = Call(
                method=method,
                path=segments,
                query={k.decode("utf-8", "replace"): v[-1].decode("utf-8", "replace")
                       for k, v in (request.args or {}).items() if v},
                body=_body(request),
                content_type=_header(request, b"content-type"),
                accept=_header(request, b"accept"),
                access=Access(self._authorizer, principal, address),
                base_url=f"{self._scheme}://{_header(request, b'host') or 'localhost'}",
                address=address,
            )
            return await route.handler(call, **params)
        if known_path:
            raise ProxyError(405, 405, f"HTTP 405 Method Not Allowed: {method} {raw_path}")
        raise ProxyError(404, NOT_FOUND, f"HTTP 404 Not Found: {raw_path}")

    def _crashed(self, failure: Failure, request: Request) -> None:
        _log.failure("REST Proxy request {method} {path} failed", failure,
                     method=request.method, path=request.path)
        if not request.finished and not request_gone(request):
            _write(request, Answer({"error_code": KAFKA_ERROR, "message": "internal error"},
                                   status=500, content_type=_error_type(request)))


def _body(request: Request) -> bytes:
    content = request.content
    return b"" if content is None else bytes(content.read())


def _header(request: Request, name: bytes) -> str | None:
    value = request.getHeader(name)
    return None if value is None else value.decode("latin-1")


def _error_type(request: Request) -> str:
    path = request.path or b""
    return "application/json" if path.startswith(b"/v3") else "application/vnd.kafka.v2+json"


def _write(request: Request, answer: Answer) -> None:
    if request.finished or request_gone(request):
        return
    request.setResponseCode(answer.status)
    request.setHeader(b"cache-control", b"no-store")
    if answer.status == 204:
        request.finish()
        return
    if answer.raw is not None:
        data = answer.raw
    else:
        data = json.dumps(answer.body, separators=(",", ":"), ensure_ascii=False).encode()
    request.setHeader(b"content-type", answer.content_type.encode("latin-1"))
    request.setHeader(b"content-length", str(len(data)).encode("ascii"))
    request.write(data)
    request.finish()


class LimitedSite(Site):
    """A Site that admits a connection only within ``connections`` (the listener's
    ``--max-connections`` and the per-address limits the other listeners share), so the
    bodies held at once are bounded too: at most connections x the body limit."""

    def __init__(self, resource: Resource, connections: ConnectionLimit | None) -> None:
        super().__init__(resource)
        self._connections = connections

    def buildProtocol(self, addr: Any) -> Any:
        limit = self._connections
        host = str(getattr(addr, "host", ""))
        if limit is not None and not limit.admit(host):
            return None  # Twisted closes the socket at once
        protocol = super().buildProtocol(addr)
        if limit is not None and protocol is not None:
            lost = protocol.connectionLost

            def released(reason: Failure) -> None:
                limit.release(host)
                lost(reason)

            protocol.connectionLost = released
        return protocol


def make_proxy_site(
    resource: ProxyResource, limits: ProxyLimits, connections: ConnectionLimit | None = None
) -> Site:
    site = LimitedSite(resource, connections)
    site.requestFactory = bounded_request(limits.max_body_bytes)
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    return site


__all__ = [
    "Answer", "Call", "LimitedSite", "ProxyResource", "Route", "make_proxy_site", "parse_json",
    "too_deep",
]
