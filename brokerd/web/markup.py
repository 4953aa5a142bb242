"""The shell of the console's data pages (message browser, schema registry, actions) and
the building blocks they share, in :mod:`twisted.web.template`: every text is a string
in a tag tree and the flattener escapes it, so a record's ``<script>`` or quote is inert
by construction, not by remembering to escape.

These pages do not refresh themselves (a form being filled must not be swapped away),
so they carry no script at all: their Content-Security-Policy allows none, and lets
forms post only to the console itself. What this module does not do: decide what a
page shows (:mod:`brokerd.web.browse_page`, :mod:`brokerd.web.schema_pages`,
:mod:`brokerd.web.actions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote, urlencode

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.server import NOT_DONE_YET, Request
from twisted.web.template import Flattenable, Tag, flattenString, tags

from brokerd.net.twisted_state import request_gone
from brokerd.web.console_html import CSS

__all__ = [
    "DATA_HEADERS",
    "Flattenable",
    "facts",
    "hidden",
    "method_not_allowed",
    "page",
    "respond",
    "table",
    "topic_href",
    "url",
]

_log = Logger()

_MORE_CSS = (
    "pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em;"
    "max-height:24em;overflow:auto}"
    "form.inline{display:flex;flex-wrap:wrap;gap:.6em 1em;align-items:end;margin:.4em 0}"
    "form.inline label,form.stack label{display:flex;flex-direction:column;font-size:.85em;"
    "color:#57606a}"
    "form.stack{display:grid;gap:.6em;max-width:48em}"
    "input,select,textarea{font:inherit;padding:.2em .4em}"
    "textarea{font-family:ui-monospace,monospace;min-height:5em}"
    "tr.record td:nth-child(3){white-space:nowrap}tr.record td:nth-child(5){width:45%}"
    ".note{font-size:.8em;color:#57606a}.cut{font-size:.8em;color:#9a6700}"
    ".banner{padding:.5em 1em;border-radius:6px;margin:.6em 0;background:#fff8c5;"
    "border:1px solid #d4a72c}"
    ".error{background:#ffebe9;border-color:#cf222e}.done{background:#dafbe1;"
    "border-color:#1a7f37}"
    "button.danger{color:#fff;background:#cf222e;border:0;padding:.3em 1em;"
    "border-radius:4px}"
    "del{background:#ffebe9}ins{background:#dafbe1}"
    "pre.diff span,pre.diff ins,pre.diff del{display:block;text-decoration:none}"
)

#: Response headers of the data pages: no script, forms post to this origin only.
DATA_HEADERS: dict[bytes, bytes] = {
    b"content-type": b"text/html; charset=utf-8",
    b"cache-control": b"no-store",
    b"x-content-type-options": b"nosniff",
    b"x-frame-options": b"DENY",
    # Not no-referrer: under it a browser sends "Origin: null" even on the console's own
    # form posts, which the CSRF check refuses (another site's must not pass as ours).
    b"referrer-policy": b"same-origin",
    b"content-security-policy": (
        b"default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def page(title: str, *body: Flattenable) -> Tag:
    """A whole document: the console's header and ``body`` in its main area."""
    nav = tags.nav(
        tags.a("Topics", href="/#topics"), " \u00b7 ",
        tags.a("Groups", href="/#groups"), " \u00b7 ",
        tags.a("Schemas", href="/schemas"), " \u00b7 ",
        tags.a("Broker", href="/#broker"),
    )
    return tags.html(lang="en")(
        tags.head(
            tags.meta(charset="utf-8"),
            tags.meta(name="viewport", content="width=device-width, initial-scale=1"),
            tags.title(f"{title} - brokerd"),
            tags.style(CSS + _MORE_CSS),
        ),
        tags.body(
            tags.header(tags.a("brokerd", class_="brand", href="/"), nav),
            Tag("main")(*body),
        ),
    )


def respond(request: Request, status: int, title: str, *body: Flattenable) -> object:
    """Write the page (status, headers, document) to ``request``; returns what a
    ``render_*`` method returns for it."""
    request.setResponseCode(status)
    for name, value in DATA_HEADERS.items():
        request.setHeader(name, value)
    d: Deferred[bytes] = flattenString(None, page(title, *body))

    def written(html: bytes) -> None:
        if not request.finished and not request_gone(request):
            request.write(b"<!doctype html>" + html)
            request.finish()

    def failed(failure: Failure) -> None:
        _log.failure("rendering a console page", failure)
        if not request.finished and not request_gone(request):
            request.write(b"<!doctype html><p>The page failed to render.</p>")
            request.finish()

    d.addCallbacks(written, failed)
    return NOT_DONE_YET


def method_not_allowed(request: Request, allowed: bytes) -> bytes:
    """A 405 for a method the page does not serve, naming the ones it does."""
    request.setResponseCode(405)
    request.setHeader(b"allow", allowed)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    return b"Method not allowed here: " + allowed + b" only.\n"


def url(path: str, arguments: Mapping[str, str] | None = None) -> str:
    return path + ("?" + urlencode(arguments) if arguments else "")


def topic_href(name: str, *rest: str) -> str:
    return "/".join(["/topics", quote(name, safe=""), *rest])


def table(
    headers: Sequence[str], rows: Iterable[Tag], *, empty: str, numeric: Sequence[int] = ()
) -> Tag:
    """A table of ``rows`` (each a ``tr``), or the ``empty`` sentence."""
    body = list(rows)
    if not body:
        return tags.p(empty, class_="muted")
    head = [
        tags.th(h, class_="num") if i in numeric else tags.th(h) for i, h in enumerate(headers)
    ]
    return tags.table(tags.thead(tags.tr(*head)), tags.tbody(*body))


def facts(items: Sequence[tuple[str, Flattenable]]) -> Tag:
    out: list[Tag] = []
    for name, value in items:
        out.extend((tags.dt(name), tags.dd(value)))
    return tags.dl(*out, class_="facts")


def hidden(fields: Mapping[str, str]) -> list[Tag]:
    return [tags.input(type="hidden", name=k, value=v) for k, v in fields.items()]
