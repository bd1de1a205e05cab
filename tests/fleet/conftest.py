"""The fleet's tests' box: a fake exporter served in the test's own process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fleet_page import FakeExporter


@pytest.fixture
def box() -> Iterator[FakeExporter]:
    exporter = FakeExporter()
    yield exporter
    exporter.close()
