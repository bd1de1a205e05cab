"""The normal rate a session keeps between runs: the one remembered for the server's setup
given to the diagnosis once the setup is known, and the one this run learns written back."""

from __future__ import annotations

from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.normal_rate import LEARNED
from vramtop.session.normal_store import NormalRateStore

SAVE_EVERY_S = 60.0  # a learned normal rate is written to the store at most this often


class NormalMemory:
    """Between `diagnoser` and `store` (None: nothing is remembered, e.g. in tests)."""

    def __init__(self, diagnoser: Diagnoser, store: NormalRateStore | None) -> None:
        self.diagnoser = diagnoser
        self.store = store
        self._loaded_key: str | None = None
        self._saved: tuple[str, float] | None = None  # key, sample t of the last save

    def sync(self, t: float) -> None:
        """After the sample at `t`: a new setup's remembered normal is given to the diagnosis,
        and the learned one saved when due."""
        key = self.diagnoser.decode_key
        if self.store is None or key is None:
            return
        if key != self._loaded_key:
            self._loaded_key = key
            remembered = self.store.load(key)
            if remembered is not None:
                self.diagnoser.remember(remembered)
        self.save(t)

    def save(self, t: float | None, force: bool = False) -> None:
        """Write the normal learned on this run (a remembered one is already stored): as soon
        as it is known, then at most every `SAVE_EVERY_S`, and when the session closes
        (`force`)."""
        key = self.diagnoser.decode_key
        normal = self.diagnoser.normal_rate()
        if self.store is None or key is None or normal is None or normal.source != LEARNED:
            return
        last = self._saved
        recent = (
            last is not None and last[0] == key and t is not None and t - last[1] < SAVE_EVERY_S
        )
        if recent and not force:
            return
        self.store.save(key, normal)
        self._saved = (key, t if t is not None else 0.0)
