from __future__ import annotations

import pytest

from tests.contracts.clocks import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()
