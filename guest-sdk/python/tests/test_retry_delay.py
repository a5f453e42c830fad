"""A transient error's own retry delay (kopf's ``TemporaryError(delay=)``), as the fake host
applies the host's rule to it."""

import datetime

import pytest

from wasmop import Config, Error, Kind, Outcome, Retry
from wasmop.testing import FakeHost


def failing(error, retry=None):
    class Flaky:
        config = Config("flaky", Kind.namespaced("", "v1", "ConfigMap"))
        if retry is not None:
            config = config.retry(retry)

        def reconcile(self, obj: dict, ctx) -> Outcome:
            raise error

    return Flaky


OBJECT = {"metadata": {"name": "a", "namespace": "default"}}


def test_the_delay_takes_seconds_a_timedelta_or_a_go_duration():
    assert Error.transient("x", delay=30).delay == 30.0
    assert Error.transient("x", delay=datetime.timedelta(minutes=1)).delay == 60.0
    assert Error.transient("x", delay="1m30s").delay == 90.0
    assert Error.transient("x").delay is None
    assert Error.transient("x", delay=5) != Error.transient("x")
    with pytest.raises(ValueError, match="only a transient Error"):
        Error("permanent", "x", delay=1)
    with pytest.raises(ValueError, match="not a duration"):
        Error.transient("x", delay="soon")


def test_the_asked_delay_replaces_the_backoff():
    run = FakeHost().reconcile(failing(Error.transient("rate limited", delay=30)), OBJECT)
    assert run.retry_after == 30.0


def test_without_a_delay_the_backoff_applies():
    run = FakeHost().reconcile(failing(Error.transient("down")), OBJECT)
    assert run.retry_after == 2


def test_the_delay_is_capped_at_the_policys_max_interval():
    run = FakeHost().reconcile(failing(Error.transient("x", delay="1h"), Retry(max_interval=60)), OBJECT)
    assert run.retry_after == 60


def test_errors_that_are_not_retried_have_no_retry():
    assert FakeHost().reconcile(failing(Error.permanent("no")), OBJECT).retry_after is None
    assert FakeHost().reconcile(failing(Error.transient("x", delay=1), Retry(max_attempts=0)), OBJECT).retry_after is None
