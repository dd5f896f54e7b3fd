"""What every part of the HTML report writes with: escaped text and the page that collects the
charts (:mod:`assay.report.html` lays the page out, :mod:`assay.report.sections` fills it)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["Page", "esc"]


def esc(value: Any) -> str:
    """HTML-escaped text of ``value`` (None shows as a dash)."""
    return "-" if value is None else html.escape(str(value))


class Page:
    """Collects figures while sections are rendered; each becomes a ``<div data-fig>`` and a JSON blob."""

    def __init__(self) -> None:
        self.figures: list[str] = []

    def chart(self, fig: go.Figure, css_class: str = "chart") -> str:
        """The placeholder of ``fig`` (drawn by the page script)."""
        fig_id = f"fig-{len(self.figures)}"
        # "</" cannot appear inside a <script> element; JSON allows the escaped form
        data = fig.to_json().replace("</", "<\\/")
        self.figures.append(f'<script type="application/json" id="{fig_id}">{data}</script>')
        return f'<div class="{css_class}" data-fig="{fig_id}"></div>'
