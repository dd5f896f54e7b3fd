"""Import paths of the evaluator libraries users are moving from, served by assay.

Change only the import line: ``openevals.X`` → ``assay.compat.openevals.X``, ``agentevals.X`` →
``assay.compat.agentevals.X``. The factories return functions with those libraries' call
convention (``evaluator(inputs=, outputs=, reference_outputs=, **kwargs)`` → a result dict with
``key``, ``score``, ``comment``); ``.evaluator`` on each is the assay evaluator behind it, which a
run file or :mod:`assay.evaluators` also offers.

======================================== =====================================================
``assay.compat.openevals``               ``create_llm_as_judge``, ``create_async_llm_as_judge``,
                                         ``create_trajectory_llm_as_judge``,
                                         ``create_trajectory_match_evaluator`` (+ async twins)
``assay.compat.openevals.llm``           ``create_llm_as_judge``, ``create_async_llm_as_judge``
``assay.compat.openevals.prompts``       the prebuilt prompt constants (``CORRECTNESS_PROMPT`` …)
``assay.compat.openevals.trajectory``    ``.match`` and ``.llm``, as in openevals
``assay.compat.openevals.json``          ``create_json_match_evaluator`` (a list of results)
``assay.compat.openevals.code``          ``.pyright``, ``.mypy``, ``.llm`` (``create_code_llm_as_judge``),
                                         ``.e2b.execution`` / ``.e2b.pyright`` (run locally, no E2B)
``assay.compat.openevals.string``        ``.embedding_similarity`` (a local embedding model)
``assay.compat.agentevals.trajectory``   ``check_trajectory``, the trajectory factories and
                                         ``TRAJECTORY_ACCURACY_PROMPT[_WITH_REFERENCE]``; ``.match``, ``.llm``
======================================== =====================================================

The package is not named ``openevals``: it never shadows the real library.
"""
