"""The SASL and SCRAM-credential bodies (:mod:`brokerd.kafka.wire.messages.sasl`): the
whole-request refusal of DescribeUserScramCredentials, and arrays given as lists."""

from __future__ import annotations

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.messages.sasl import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    UserName,
)

DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def test_a_refusal_answers_each_user_named_once_in_order() -> None:
    request = DescribeUserScramCredentialsRequest(
        users=[UserName(name="bob"), UserName(name="alice"), UserName(name="bob")])
    response = DescribeUserScramCredentialsResponse.refused(request, DENIED, "no")
    assert response.results == (
        DescribeUserScramCredentialsResult(user="bob", error_code=DENIED, error_message="no"),
        DescribeUserScramCredentialsResult(user="alice", error_code=DENIED, error_message="no"),
    )
    # The request-level fields stay clear (librdkafka crashes on them).
    assert (response.error_code, response.error_message) == (0, None)


def test_a_refusal_of_every_user_is_one_result_with_an_empty_name() -> None:
    for users in (None, []):
        request = DescribeUserScramCredentialsRequest(users=users)
        (result,) = DescribeUserScramCredentialsResponse.refused(request, DENIED, "x").results
        assert (result.user, result.error_code) == ("", DENIED)


def test_arrays_become_tuples_and_a_null_array_stays_null() -> None:
    assert DescribeUserScramCredentialsRequest().users is None
    request = DescribeUserScramCredentialsRequest(users=[UserName(name="a")])
    assert request.users == (UserName(name="a"),)
    assert DescribeUserScramCredentialsResponse().results == ()
