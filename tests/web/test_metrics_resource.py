"""The /metrics resource: Prometheus' text format, and OpenMetrics when asked."""

from __future__ import annotations

from typing import cast

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from brokerd.metrics.registry import BrokerMetrics
from brokerd.operator.inspect import Inspector
from brokerd.web.metrics_resource import MetricsResource

from tests.metrics.test_collectors import FakeInspector


class MetricsResourceTest(SynchronousTestCase):
    def test_text_format_and_openmetrics_on_request(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        resource = MetricsResource(metrics.registry)
        request = DummyRequest([b""])
        body = resource.render_GET(request)
        content_type = request.responseHeaders.getRawHeaders(b"content-type")[0]
        self.assertTrue(content_type.startswith(b"text/plain"))
        self.assertIn(b"brokerd_topics 0.0", body)
        request = DummyRequest([b""])
        request.requestHeaders.setRawHeaders(b"accept", [b"application/openmetrics-text"])
        body = resource.render_GET(request)
        content_type = request.responseHeaders.getRawHeaders(b"content-type")[0]
        self.assertTrue(content_type.startswith(b"application/openmetrics-text"))
        self.assertTrue(body.endswith(b"# EOF\n"))
