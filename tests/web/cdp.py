"""A headless Chromium driven over the Chrome DevTools Protocol (its websocket, through
aiohttp): load a page, run a line of JavaScript in it (fill a form, click a button), wait
for the next page, read the DOM. Enough for the console's form tests; the pages
themselves run no script (DevTools evaluation is not bound by the page's CSP)."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT = 30.0
STEP_TIMEOUT = 30.0


def chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("chromium is not installed (Debian package chromium; .ci/run installs it)")
    return binary


class Browser:
    """One Chromium process with one page; use as an async context manager."""

    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._proc: subprocess.Popen[bytes] | None = None
        self._ids = itertools.count(1)
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def __aenter__(self) -> Browser:
        import aiohttp

        self._proc = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json()
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())
        await self.send("Page.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        await self._ws.close()
        await self._session.close()
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._answers:
                self._answers.pop(data["id"]).set_result(data)
            elif "method" in data:
                await self._events.put(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[call_id] = answer
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        result = await asyncio.wait_for(answer, STEP_TIMEOUT)
        if "error" in result:
            raise RuntimeError(f"{method}: {result['error']}")
        return dict(result.get("result", {}))

    async def _loaded(self) -> None:
        while True:
            event = await asyncio.wait_for(self._events.get(), STEP_TIMEOUT)
            if event["method"] == "Page.loadEventFired":
                return

    def _drain(self) -> None:
        while not self._events.empty():
            self._events.get_nowait()

    async def open(self, url: str) -> str:
        """Load ``url``; the DOM once it has loaded."""
        self._drain()
        await self.send("Page.navigate", url=url)
        await self._loaded()
        return await self.dom()

    async def evaluate(self, expression: str) -> Any:
        found = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return found.get("result", {}).get("value")

    async def submit(self, expression: str) -> str:
        """Run ``expression`` (which submits a form); the DOM of the page it leads to."""
        self._drain()
        await self.evaluate(expression)
        await self._loaded()
        return await self.dom()

    async def dom(self) -> str:
        return str(await self.evaluate("document.documentElement.outerHTML"))


def fill(selector: str, value: str) -> str:
    """JavaScript that sets a form field's value."""
    return f"document.querySelector({json.dumps(selector)}).value = {json.dumps(value)};"
