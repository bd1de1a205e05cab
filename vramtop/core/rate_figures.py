"""A token rate as every screen and text writes it (tok/s): whole numbers, except that a rate
above 0 is never written 0. A collapse to 0.3 tok/s per request read "0/req" beside a
generation that went on, as if nothing were generated; it reads "0.3/req" (below a tenth:
"<0.1"). 0 is said only of a rate that is 0; "—" of one not known.

Pure: a number in, words out. The JSON gives the numbers themselves, rounded to hundredths.
"""

from __future__ import annotations

UNKNOWN = "—"


def rate_text(value: float | None, digits: int = 0) -> str:
    """`value` with `digits` decimals, or one more where those round a rate above 0 to 0
    (`0.3` for 0.3 at `digits=0`); `<0.1` (`<0.01`, …) where that one rounds to 0 too."""
    if value is None:
        return UNKNOWN
    text = f"{value:.{digits}f}"
    if value > 0 and float(text) == 0:
        finer = f"{value:.{digits + 1}f}"
        return finer if float(finer) > 0 else f"<{10.0 ** -(digits + 1):g}"
    return text
