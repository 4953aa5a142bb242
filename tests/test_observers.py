"""The names of the two protocols' APIs in the metrics' labels."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.wire.requests import apis
from brokerd.native.messages import RequestType
from brokerd.observers import api_name


class ApiNamesTest(SynchronousTestCase):
    def test_api_names(self) -> None:
        self.assertEqual(api_name(apis.ApiKey.PRODUCE), "Produce")
        self.assertEqual(api_name(apis.ApiKey.API_VERSIONS), "ApiVersions")
        self.assertEqual(api_name(RequestType.LONG_POLL_FETCH), "LongPollFetch")
        # Equal values of the two protocols' enums are different APIs.
        self.assertEqual(api_name(apis.ApiKey(int(RequestType.FETCH))), "ListOffsets")
        self.assertEqual(api_name(RequestType.FETCH), "Fetch")
