"""Fixtures of the algorithm-part tests; the helpers live in part_harness.py."""
import pytest

from part_harness import make_ctx


@pytest.fixture
def ctx_factory():
    return make_ctx
