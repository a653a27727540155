"""``tiles_only``: run the sliding window on its SDPA tiles (``kernel='auto'`` then never picks
the native kernel), for the tests that pin the tiles path; ``tests/local/test_native.py``
tests the native kernel."""

import pytest

import attnkit.local.native as native


@pytest.fixture
def tiles_only(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(native, "USE", False)
