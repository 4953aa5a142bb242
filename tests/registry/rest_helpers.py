"""A small Confluent REST client for the registry tests (urllib, no retries), and the
wait for a broker's registry to finish its start-up replay."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any

MEDIA = "application/vnd.schemaregistry.v1+json"


class Rest:
    def __init__(self, base: str, user: str | None = None, password: str | None = None) -> None:
        self.base = base
        self.auth = None
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.auth = f"Basic {token}"

    def raw(self, method: str, path: str, body: bytes | None = None,
            content_type: str = MEDIA) -> tuple[int, bytes, dict[str, str]]:
        headers = {"content-type": content_type, "accept": MEDIA}
        if self.auth:
            headers["authorization"] = self.auth
        request = urllib.request.Request(self.base + path, method=method, data=body,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                headers = {k.lower(): v for k, v in answer.headers.items()}
                return answer.status, answer.read(), headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), {k.lower(): v for k, v in e.headers.items()}

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        status, raw, _headers = self.raw(method, path, data)
        return status, json.loads(raw) if raw else None

    def wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                status, _ = self("GET", "/subjects")
            except OSError:
                status = 0
            if status in (200, 401, 403):
                return
            assert time.monotonic() < deadline, f"registry never ready ({status})"
            time.sleep(0.05)
