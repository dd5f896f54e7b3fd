"""The report's charts as plotly figures (drawn in the page by the inlined plotly.js).

Every function takes report data and returns a :class:`plotly.graph_objects.Figure`; the HTML
writer serializes each one to JSON and the page draws them offline. plotly is the ``assay[report]``
extra, imported only when an HTML report is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.exceptions import ConfigError
from assay.report.aggregate import BINS, KeyAggregate

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from assay.report.build import RunReport
    from assay.report.compare import Comparison
    from assay.report.trend import Trend

__all__ = [
    "compare_chart",
    "dead_letter_chart",
    "evaluator_overview",
    "histogram",
    "judge_chart",
    "plotly_js",
    "trend_chart",
    "trend_counts_chart",
]

PASS = "#2e8b57"
FAIL = "#d9534f"
BEFORE = "#9aa5b1"
NOW = "#3b6fb6"
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


def _go() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError as exc:
        raise ConfigError("the HTML report needs plotly: pip install 'assay[report]'") from exc
    return go


def plotly_js() -> str:
    """The plotly.js bundle shipped with the plotly package (inlined once per page)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as exc:
        raise ConfigError("the HTML report needs plotly: pip install 'assay[report]'") from exc
    return str(get_plotlyjs())


def _layout(
    fig: go.Figure, *, height: int, title: str | None = None, reversed_legend: bool = False, **kwargs: Any
) -> go.Figure:
    legend = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1}
    if reversed_legend:  # horizontal grouped bars draw the first trace at the bottom
        legend["traceorder"] = "reversed"
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 10, "r": 10, "t": 36 if title else 12, "b": 10},
        font=FONT,
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 14}} if title else None,
        legend=legend,
        **kwargs,
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def evaluator_overview(report: RunReport) -> go.Figure:
    """Pass rate and mean score of every result key, as horizontal bars."""
    go = _go()
    keys = list(reversed(report.keys.values()))
    names = [k.key for k in keys]
    fig = go.Figure()
    fig.add_bar(y=names, x=[k.pass_rate for k in keys], name="pass rate", orientation="h", marker_color=PASS)
    fig.add_bar(y=names, x=[k.mean for k in keys], name="mean score", orientation="h", marker_color=NOW)
    fig.update_traces(texttemplate="%{x:.3f}", textposition="outside", cliponaxis=False)
    fig.update_xaxes(range=[0, 1.12], tickformat=".0%")
    return _layout(fig, height=90 + 46 * len(keys), barmode="group", reversed_legend=True)


def histogram(agg: KeyAggregate) -> go.Figure:
    """Score distribution of one key: bins below the threshold in red, at or above in green."""
    go = _go()
    centers = [(i + 0.5) / BINS for i in range(BINS)]
    colors = [PASS if (i + 1) / BINS > agg.threshold else FAIL for i in range(BINS)]
    fig = go.Figure(
        go.Bar(
            x=centers,
            y=agg.bins,
            width=1 / BINS * 0.92,
            marker_color=colors,
            hovertemplate="score %{x:.3f}: %{y:,} traces<extra></extra>",
        )
    )
    fig.add_vline(x=agg.threshold, line_dash="dash", line_color="#555", annotation_text="threshold")
    fig.update_xaxes(range=[0, 1], title_text="score")
    fig.update_yaxes(title_text="traces")
    return _layout(fig, height=240, showlegend=False)


def dead_letter_chart(report: RunReport) -> go.Figure:
    """Dead letters by reason (stage / error type), largest first."""
    go = _go()
    groups = list(reversed(report.dead.by_reason()[:15]))
    fig = go.Figure(
        go.Bar(
            y=[f"{g.stage} / {g.error_type}" for g in groups],
            x=[g.count for g in groups],
            orientation="h",
            marker_color=FAIL,
            text=[f"{g.count:,}" for g in groups],
            textposition="outside",
            cliponaxis=False,
        )
    )
    return _layout(fig, height=80 + 34 * len(groups), showlegend=False)


def judge_chart(rows: list[dict[str, Any]]) -> go.Figure:
    """Per judge: what its HTTP attempts came back with (ok, 429, 5xx, timeouts, other), stacked."""
    go = _go()
    rows = list(reversed(rows))
    names = [r["judge"] for r in rows]
    fig = go.Figure()
    for field, label, color in (
        ("ok", "ok", PASS),
        ("http_429", "429 rate limited", "#f0ad4e"),
        ("http_5xx", "5xx", FAIL),
        ("timeouts", "timeouts", "#8e44ad"),
        ("other", "other errors", BEFORE),
    ):
        values = [r.get(field, 0) for r in rows]
        fig.add_bar(
            y=names,
            x=values,
            name=label,
            orientation="h",
            marker_color=color,
            text=[f"{v:,}" if v else "" for v in values],
            textposition="inside",
            hovertemplate="%{y}: %{x:,} " + label + "<extra></extra>",
        )
    fig.update_xaxes(title_text="HTTP attempts (retries included)")
    return _layout(fig, height=110 + 40 * len(rows), barmode="stack")


def compare_chart(cmp: Comparison) -> go.Figure:
    """Pass rate before and now per result key, in the order of the deltas (regressions first)."""
    go = _go()
    deltas = list(reversed(cmp.deltas))
    names = [d.key for d in deltas]
    fig = go.Figure()
    fig.add_bar(
        y=names,
        x=[d.baseline.pass_rate if d.baseline else None for d in deltas],
        name=f"before ({cmp.baseline.info.label})",
        orientation="h",
        marker_color=BEFORE,
    )
    fig.add_bar(
        y=names,
        x=[d.current.pass_rate if d.current else None for d in deltas],
        name=f"now ({cmp.current.info.label})",
        orientation="h",
        marker_color=NOW,
    )
    fig.update_traces(texttemplate="%{x:.3f}", textposition="outside", cliponaxis=False)
    fig.update_xaxes(range=[0, 1.12], tickformat=".0%", title_text="pass rate")
    return _layout(fig, height=90 + 46 * len(deltas), barmode="group", reversed_legend=True)


def _shade_failed_nights(fig: go.Figure, trend: Trend) -> None:
    """A band behind each night that did not end ok: red for a failed or unfinished run, amber
    for a whole output whose gates (or dead-letter limits) failed."""
    for i, status in enumerate(trend.statuses):
        if status in ("ok", "no summary"):
            continue
        color = "rgba(240,173,78,0.18)" if status in ("gate_failed", "dead_letters") else "rgba(217,83,79,0.16)"
        fig.add_shape(
            type="rect",
            xref="x",
            yref="paper",
            x0=i - 0.5,
            x1=i + 0.5,
            y0=0,
            y1=1,
            fillcolor=color,
            line_width=0,
            layer="below",
        )


def _category_x(fig: go.Figure, trend: Trend) -> list[str]:
    from assay.report.trend import short_labels

    labels = short_labels(trend.labels)
    fig.update_xaxes(type="category", tickangle=-45 if len(labels) > 8 else 0, automargin=True, nticks=16)
    return labels


def trend_chart(trend: Trend, metric: str, title: str) -> go.Figure:
    """One line per result key of ``metric`` over the runs; failed nights shaded (and gaps)."""
    go = _go()
    fig = go.Figure()
    labels = _category_x(fig, trend)
    for key in trend.keys:
        fig.add_scatter(x=labels, y=trend.series(key, metric), mode="lines+markers", name=key)
    _shade_failed_nights(fig, trend)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", fixedrange=True)
    return _layout(fig, height=340, title=title)


def trend_counts_chart(trend: Trend) -> go.Figure:
    """Records read and dead letters per run (bars), judge cost (line, right axis); both axes start
    at zero, so a 10 % change looks like one."""
    go = _go()
    fig = go.Figure()
    labels = _category_x(fig, trend)
    read = trend.count_series("read")
    fig.add_bar(x=labels, y=read, name="read", marker_color=BEFORE)
    fig.add_bar(x=labels, y=trend.count_series("dead_letters"), name="dead letters", marker_color=FAIL)
    fig.update_yaxes(rangemode="tozero", range=[0, max(1, *read) * 1.08], title_text="records")
    cost = trend.cost_series()
    if any(cost):
        fig.add_scatter(x=labels, y=cost, name="judge cost $", yaxis="y2", mode="lines+markers")
        fig.update_layout(
            yaxis2={
                "overlaying": "y",
                "side": "right",
                "title": {"text": "USD"},
                "showgrid": False,
                "rangemode": "tozero",
                "range": [0, max(cost) * 1.1],
            }
        )
    _shade_failed_nights(fig, trend)
    return _layout(fig, height=300, title="volume and cost (axes from zero)", barmode="group")
