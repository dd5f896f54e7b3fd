"""How a p-value is written: three significant digits, and ``<1e-300`` below what a double holds
meaningfully (an exact test's tail can underflow to 0.0, and ``p=0`` claims what no test can).

>>> format_p(0.01234), format_p(0.0), format_p(1e-320), format_p(None)
('0.0123', '<1e-300', '<1e-300', '-')
>>> p_text(0.5), p_text(0.0)
('p=0.5', 'p<1e-300')
"""

from __future__ import annotations

P_FLOOR = 1e-300
"""p-values below this are written as ``<1e-300``."""


def format_p(p: float | None) -> str:
    """A table cell: ``0.0123``, ``<1e-300``, or ``-`` when there is no test."""
    if p is None:
        return "-"
    return f"<{P_FLOOR:g}" if p < P_FLOOR else f"{p:.3g}"


def p_text(p: float) -> str:
    """In a sentence: ``p=0.0123`` or ``p<1e-300``."""
    text = format_p(p)
    return f"p{text}" if text.startswith("<") else f"p={text}"


__all__ = ["P_FLOOR", "format_p", "p_text"]
