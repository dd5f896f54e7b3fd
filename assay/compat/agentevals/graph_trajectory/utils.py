"""``from agentevals.graph_trajectory.utils import extract_langgraph_trajectory_from_thread`` (and
``aextract_…``, ``…_from_snapshots``): a LangGraph thread as ``{"inputs", "outputs"}`` graph
trajectories (install ``assay[langgraph]``)."""

from __future__ import annotations

from assay.evaluators.graph_trajectory import (
    aextract_langgraph_trajectory_from_thread,
    extract_langgraph_trajectory_from_snapshots,
    extract_langgraph_trajectory_from_thread,
)

__all__ = [
    "aextract_langgraph_trajectory_from_thread",
    "extract_langgraph_trajectory_from_snapshots",
    "extract_langgraph_trajectory_from_thread",
]
