"""The Kafka dispatch (:mod:`brokerd.kafka.listener.dispatch`): every API ApiVersions
advertises is routed, each behind an ACL rule but ApiVersions itself; an answer given as
a coroutine is driven to the client; a handler that raises is a bug, logged, and its
connection closed, as a KafkaFactory over the fake core of test_protocol builds it."""

from __future__ import annotations

import inspect
from typing import Any

from brokerd.kafka.server.handlers.sasl import SASL_API_KEYS
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.registry import SPECS

from tests.kafka.listener.test_protocol import KafkaTestCase


class DispatchTests(KafkaTestCase):
    def test_every_advertised_api_is_routed_and_guarded(self) -> None:
        routes = self.factory.handlers.routes
        # The SASL APIs are answered before authentication, by the listener's SASL phase.
        self.assertEqual(set(routes), set(SPECS) - SASL_API_KEYS)
        unguarded = [key for key, route in routes.items() if route.rule is None]
        self.assertEqual(unguarded, [ApiKey.API_VERSIONS])

    def test_a_coroutine_answer_reaches_the_client(self) -> None:
        handlers: dict[ApiKey, Any] = self.factory.handlers._handlers
        real = handlers[ApiKey.API_VERSIONS]
        awaited: list[ApiKey] = []

        async def through_a_coroutine(conn: Any, request: Any) -> Any:
            answer = real(conn, request)
            awaited.append(request.api_key)
            return await answer if inspect.isawaitable(answer) else answer

        handlers[ApiKey.API_VERSIONS] = through_a_coroutine
        self.send(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
        self.assertEqual(awaited, [ApiKey.API_VERSIONS])
        response = self.one()
        self.assertEqual(response.error_code, 0)
        self.assertIn(int(ApiKey.FETCH), {entry.api_key for entry in response.api_keys})

    def test_a_handler_that_raises_is_logged_and_closes_the_connection(self) -> None:
        def broken(conn: Any, request: Any) -> Any:
            raise RuntimeError("a bug in a handler")

        self.factory.handlers._handlers[ApiKey.API_VERSIONS] = broken
        self.send(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertEqual(self.responses(), [])
        self.assertTrue(self.tr.disconnecting)
