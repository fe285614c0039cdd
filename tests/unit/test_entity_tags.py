"""If-None-Match on a context read (memlog/api/context_json.py): a listed tag matches, `*` does not."""

from __future__ import annotations

from memlog.api.context_json import matches

TAG = '"12-0-abc"'


def test_a_listed_tag_matches_weakly_and_star_never_does() -> None:
    assert matches(TAG, TAG)
    assert matches(f'"other", W/{TAG}', TAG)
    assert not matches('"other"', TAG)
    assert not matches(None, TAG) and not matches("", TAG)
    # issue 41: a context always exists, so `*` would answer 304 for ever
    assert not matches("*", TAG)
    assert not matches('*, "other"', TAG)
