"""``from agentevals.graph_trajectory… import …`` (see :mod:`assay.compat`): ``.strict``
(``graph_trajectory_strict_match``), ``.llm`` (``create_graph_trajectory_llm_as_judge``) and
``.utils`` (``extract_langgraph_trajectory_from_thread`` …), over assay's graph trajectory
evaluators (:mod:`assay.evaluators.graph_trajectory`)."""
