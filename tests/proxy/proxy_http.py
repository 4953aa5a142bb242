"""A small HTTP client of the REST Proxy for the tests (the standard library's)."""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"


class Answer:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw

    @property
    def json(self) -> Any:
        return json.loads(self.raw) if self.raw else None

    def __repr__(self) -> str:
        return f"<{self.status} {self.raw[:300]!r}>"


def call(
    port: int,
    method: str,
    path: str,
    body: object = None,
    *,
    content_type: str = V2,
    accept: str | None = None,
    user: tuple[str, str] | None = None,
    raw: bytes | None = None,
    timeout: float = 15,
) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": content_type}
    if accept is not None:
        headers["Accept"] = accept
    if user is not None:
        token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      response.read())
    finally:
        conn.close()
