# -*- test-case-name: tests.web.test_actions -*-
"""Cross-site request forgery: why a form POST from another site cannot act through the
console, even where the browser sends the console's HTTP Basic credentials or client
certificate by itself.

Two checks, both needed for every POST:

- the form's token: an HMAC, under a key drawn when the console starts, of the
  principal the request authenticated as. Only a page of the console (same origin) can
  read it; another site's form cannot know it. A restart draws a new key, so a form
  left open across a restart is refused and must be loaded again;
- the browser's own word where it gives it: a ``Sec-Fetch-Site`` other than
  ``same-origin`` (or ``none``: typed by the user), or an ``Origin`` whose host and port
  are not the request's ``Host`` (``null`` included: an opaque origin, a sandboxed or
  ``data:`` page), is refused whatever the token. (So the data pages' referrer policy is
  ``same-origin``: under ``no-referrer`` browsers send ``Origin: null`` on their own
  form posts too.)

What it does not do: authenticate (:mod:`brokerd.web.auth`) or authorize
(:mod:`brokerd.web.actions` asks the ACLs).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from urllib.parse import urlsplit

from twisted.web.server import Request

__all__ = ["TOKEN_FIELD", "CsrfGuard"]

#: The form field that carries the token.
TOKEN_FIELD = "csrf"


class CsrfGuard:
    """Issues and checks the console's form tokens (one key per process)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else os.urandom(32)

    def token(self, principal: str) -> str:
        return hmac.new(self._key, principal.encode("utf-8"), hashlib.sha256).hexdigest()

    def refusal(self, request: Request, principal: str) -> str | None:
        """Why ``request`` (a POST by ``principal``) is refused, or None to let it on."""
        site = _header(request, b"sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"a request from another site (Sec-Fetch-Site: {site})"
        origin = _header(request, b"origin")
        host = _header(request, b"host")
        if origin is not None and (origin == "null" or urlsplit(origin).netloc != host):
            return f"a request from another origin ({origin})"
        given = request.args.get(TOKEN_FIELD.encode(), [b""])[0]
        if not hmac.compare_digest(given, self.token(principal).encode()):
            return "the form's token is missing or stale (load the form again)"
        return None


def _header(request: Request, name: bytes) -> str | None:
    value = request.getHeader(name)
    if value is None:
        return None
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)
