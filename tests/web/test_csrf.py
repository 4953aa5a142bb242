"""The console's CSRF guard on its own: a POST passes with the principal's token from the
same origin, and is refused (saying why) from another site or origin, with another
principal's token, or with a token of an earlier process's key."""

from __future__ import annotations

from twisted.web.test.requesthelper import DummyRequest

from brokerd.web.csrf import TOKEN_FIELD, CsrfGuard


def post(token: str | None, **headers: str) -> DummyRequest:
    request = DummyRequest([b"topics"])
    request.method = b"POST"
    request.requestHeaders.setRawHeaders(b"host", [b"127.0.0.1:8080"])
    for name, value in headers.items():
        request.requestHeaders.setRawHeaders(name.replace("_", "-").encode(), [value.encode()])
    if token is not None:
        request.args[TOKEN_FIELD.encode()] = [token.encode()]
    return request


def test_the_principals_token_from_the_same_origin_passes() -> None:
    guard = CsrfGuard(b"k" * 32)
    token = guard.token("alice")
    assert guard.refusal(post(token), "alice") is None
    same = post(token, sec_fetch_site="same-origin", origin="http://127.0.0.1:8080")
    assert guard.refusal(same, "alice") is None
    assert guard.refusal(post(token, sec_fetch_site="none"), "alice") is None


def test_another_site_or_origin_is_refused_whatever_the_token() -> None:
    guard = CsrfGuard(b"k" * 32)
    token = guard.token("alice")
    cross = guard.refusal(post(token, sec_fetch_site="cross-site"), "alice")
    assert cross is not None and "another site" in cross
    for origin in ("https://evil.example", "null", "http://127.0.0.1:9999"):
        refused = guard.refusal(post(token, origin=origin), "alice")
        assert refused is not None and origin in refused


def test_a_missing_foreign_or_stale_token_is_refused() -> None:
    guard = CsrfGuard(b"k" * 32)
    assert guard.refusal(post(None), "alice") is not None
    assert guard.refusal(post(guard.token("bob")), "alice") is not None
    # A restart draws a new key: a form loaded before it is stale.
    earlier = CsrfGuard(b"e" * 32)
    refused = guard.refusal(post(earlier.token("alice")), "alice")
    assert refused is not None and "stale" in refused
    assert CsrfGuard().token("alice") != CsrfGuard().token("alice")
