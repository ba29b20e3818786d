"""The store's one retry loop (memory/store/retrying.py): what it tries again, what it lets through at once, and
the hook the shared scopes use to reconnect before sending a batch again."""

from __future__ import annotations

import pytest

from memory.store.retrying import is_conflict, retry


class Flaky:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_a_raced_commit_is_tried_again_until_it_goes_through():
    fn = Flaky([RuntimeError("Commit conflict for version 7"), RuntimeError("retryable commit")])
    assert retry(fn, 5, first_delay=0.001) == "done" and fn.calls == 3


def test_any_other_error_is_raised_at_once():
    fn = Flaky([ValueError("bad row")])
    with pytest.raises(ValueError, match="bad row"):
        retry(fn, 5, first_delay=0.001)
    assert fn.calls == 1


def test_the_last_failure_is_raised_when_the_tries_run_out():
    fn = Flaky([RuntimeError("conflict")] * 3)
    with pytest.raises(RuntimeError, match="conflict"):
        retry(fn, 3, first_delay=0.001)
    assert fn.calls == 3


def test_a_caller_names_what_is_worth_trying_again_and_reconnects_first():
    # What the shared scopes' outbox does for a dropped connection (remote_outbox.py _apply_retrying).
    seen: list[str] = []
    fn = Flaky([ConnectionResetError("reset by peer")])
    out = retry(fn, 3, retry_on=lambda e: isinstance(e, ConnectionError), first_delay=0.001,
                before_retry=lambda e: seen.append(str(e)))
    assert out == "done" and seen == ["reset by peer"]
    # not a conflict, so the default loop would not have tried it again
    assert not is_conflict(ConnectionResetError("reset by peer"))


def test_on_error_may_say_the_write_went_through_after_all():
    fn = Flaky([RuntimeError("conflict")])
    assert retry(fn, 3, first_delay=0.001, on_error=lambda e: True) is None and fn.calls == 1
