"""Reads the profile's front door (`GET /vramtop/door` on its own listener) into a
`DoorReading`, one GET a tick over a kept-alive connection (`server_client.py`).

Never raises, and never holds a tick up for long: a door that refuses (dead, or not started
yet) answers at once; one that does not answer within `timeout_s` is not asked again for
`SKIP_AFTER_TIMEOUT` reads, so a hung door costs a tick `timeout_s` now and then, and only
the panel that shows the door goes without. None wherever the door did not answer with its
report.
"""

from __future__ import annotations

import json
import logging

from vramtop.core.door_fields import door_from_json
from vramtop.core.model import DoorReading
from vramtop.frontdoor.protocol import PREFIX as CONTROL
from vramtop.sources.http_answer import Answer
from vramtop.sources.server_client import ServerClient

log = logging.getLogger(__name__)

TIMEOUT_S = 0.25  # the report is a few hundred bytes from this machine
SKIP_AFTER_TIMEOUT = 5  # reads not asked after one timed out


class DoorReader:
    """The door at `url` (`http://HOST:PORT`); `address` is its HOST:PORT as the profile
    names it, carried in each reading."""

    def __init__(self, url: str, address: str, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.address = address
        # The door's control GET needs no key: none is sent.
        self._client = ServerClient(self.url, None, timeout_s)
        self._skip = 0
        self._failing = False

    def read(self) -> DoorReading | None:
        if self._skip > 0:
            self._skip -= 1
            return None
        answer = self._client.get(CONTROL)
        if not isinstance(answer, Answer):
            if isinstance(answer, TimeoutError):
                self._skip = SKIP_AFTER_TIMEOUT
            self._tell(f"{type(answer).__name__}: {answer}")
            return None
        reading = None
        if answer.status == 200 and not answer.too_large:
            try:
                data = json.loads(answer.text)
            except (ValueError, RecursionError):  # (nested deeper than the parser recurses)
                data = None
            if isinstance(data, dict):
                reading = door_from_json(self.address, data)
        if reading is None:
            self._tell(f"HTTP {answer.status}, not the door's report")
            return None
        if self._failing:
            self._failing = False
            log.info("front door %s answers again", self.address)
        return reading

    def _tell(self, why: str) -> None:
        """Logged once when the door stops answering, not every tick."""
        if not self._failing:
            self._failing = True
            log.info("front door %s does not answer (%s)", self.address, why)

    def close(self) -> None:
        self._client.close()
