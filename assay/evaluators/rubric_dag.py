"""Rubric DAG: a decision tree of discrete questions the judge answers one at a time, ending in a
leaf with an authored score.

Format (potato's)::

    key: answer_quality          # optional result key
    root: answers
    nodes:
      answers:
        question: Does the response directly and correctly answer the question?
        choices: ["yes", "partially", "no"]
        branches:
          yes: grounded                                  # the next node
          partially: {score: 0.5, label: partial answer} # a leaf
          no: {score: 0.0, label: does not answer}

The DAG is checked when the evaluator is built (ConfigError): the root exists, every node has a
question and choices, every choice has a branch and every branch belongs to a choice, every branch
names a node or is a leaf with a score in [0, 1], and there are no cycles.

The judge's answer is matched to a choice exactly, then ignoring case and surrounding
punctuation, then by a *unique whole-word* match in a short answer without negation. Unlike
potato's substring rule, "not partially" matches nothing (potato picks "partially") and "Nope" is
not "no"; an answer that matches no choice is an error result with the path so far.

The traversed path (node, question, choice, reasoning) is in ``metadata["path"]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from assay.evaluators.judge_base import JudgeCalls, JudgeEvaluator, JudgeParams
from assay.evaluators.judge_render import (
    PromptText,
    as_text,
    context_text,
    delimit,
    format_template,
    input_value,
    render_trace_output,
)
from assay.evaluators.rubric_presets import RUBRIC_PRESETS
from assay.exceptions import ConfigError, EvaluatorError, JudgeError, VerdictParseError
from assay.judges.base import JudgeRequest
from assay.judges.prompts import load_template
from assay.judges.verdict import extract_json_object, reasoning_property, strip_thinking
from assay.records import Result
from assay.traces.model import Trace

_NEGATIONS = frozenset({"not", "never", "neither", "nor", "none", "isn't", "isnt", "doesn't", "don't", "cannot"})
_WORD = re.compile(r"[\w'&-]+")
#: A free-text answer longer than this many words is not searched for a choice word.
SHORT_ANSWER_WORDS = 12


@dataclass(frozen=True, slots=True)
class Leaf:
    score: float
    label: str | None


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    question: str
    choices: tuple[str, ...]
    branches: dict[str, str | Leaf]


@dataclass(frozen=True, slots=True)
class Dag:
    key: str | None
    root: str
    nodes: dict[str, Node]

    def longest_path(self) -> list[Node]:
        """The nodes of the longest root-to-leaf path (an upper bound on judge calls)."""
        best: dict[str, list[Node]] = {}

        def walk(name: str) -> list[Node]:
            if name not in best:
                node = self.nodes[name]
                tails = [walk(b) for b in node.branches.values() if isinstance(b, str)]
                best[name] = [node, *max(tails, key=len, default=[])]
            return best[name]

        return walk(self.root)


def parse_dag(spec: Any, where: str) -> Dag:
    """Validate a DAG spec (ConfigError naming ``where`` and the bad node)."""

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"{where}: {msg}")

    if not isinstance(spec, dict):
        raise fail("must be a mapping with root and nodes")
    raw_nodes = spec.get("nodes")
    if not isinstance(raw_nodes, dict) or not raw_nodes:
        raise fail("nodes must be a non-empty mapping of node name -> {question, choices, branches}")
    root = spec.get("root")
    if not isinstance(root, str) or root not in raw_nodes:
        raise fail(f"root {root!r} is not one of the nodes ({', '.join(map(str, raw_nodes))})")
    nodes: dict[str, Node] = {}
    for name, raw in raw_nodes.items():
        at = f"node {name!r}"
        if not isinstance(raw, dict):
            raise fail(f"{at} must be a mapping")
        question = raw.get("question")
        if not isinstance(question, str) or not question.strip():
            raise fail(f"{at} has no question")
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices:
            raise fail(f"{at} has no choices")
        names = tuple(_choice_name(c) for c in choices)
        if len({c.casefold() for c in names}) != len(names):
            raise fail(f"{at} has duplicate choices")
        raw_branches = raw.get("branches")
        if not isinstance(raw_branches, dict):
            raise fail(f"{at} has no branches")
        branches: dict[str, str | Leaf] = {}
        for choice, target in raw_branches.items():
            c = _choice_name(choice)
            match = next((n for n in names if n.casefold() == c.casefold()), None)
            if match is None and isinstance(choice, bool):
                alias = {"true", "on"} if choice else {"false", "off"}
                match = next((n for n in names if n.casefold() in alias), None)
            if match is None:
                raise fail(f"{at}: branch {c!r} is not one of its choices {list(names)}")
            branches[match] = _target(target, f"{at}, branch {c!r}", raw_nodes, fail)
        missing = [c for c in names if c not in branches]
        if missing:
            raise fail(f"{at}: choices without a branch: {missing}")
        nodes[str(name)] = Node(str(name), question.strip(), names, branches)
    _check_acyclic(nodes, root, fail)
    key = spec.get("key")
    return Dag(str(key) if key else None, root, nodes)


def _choice_name(choice: Any) -> str:
    """YAML 1.1 reads bare ``yes``/``no`` as booleans; rubric choices mean the words."""
    if isinstance(choice, bool):
        return "yes" if choice else "no"
    return str(choice)


def _target(target: Any, at: str, raw_nodes: dict[str, Any], fail: Any) -> str | Leaf:
    if isinstance(target, str):
        if target not in raw_nodes:
            raise fail(f"{at} points to unknown node {target!r}")
        return target
    if isinstance(target, dict) and "score" in target:
        score = target["score"]
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= score <= 1.0:
            raise fail(f"{at}: leaf score must be a number in [0, 1] (got {score!r})")
        label = target.get("label")
        return Leaf(float(score), None if label is None else str(label))
    raise fail(f"{at} must be a node name or a leaf {{score, label}}")


def _check_acyclic(nodes: dict[str, Node], root: str, fail: Any) -> None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise fail(f"cycle: {' -> '.join([*trail, name])}")
        state[name] = 1
        for target in nodes[name].branches.values():
            if isinstance(target, str):
                visit(target, [*trail, name])
        state[name] = 2

    for name in [root, *nodes]:
        visit(name, [])


def match_choice(answer: str, choices: tuple[str, ...]) -> str | None:
    """The choice an answer names: exact, case/punctuation-insensitive, or a unique word match."""
    if answer in choices:
        return answer
    cleaned = answer.strip().strip("\"'`*.!,;:()[]").strip()
    for c in choices:
        if c.casefold() == cleaned.casefold():
            return c
    words = [w.casefold() for w in _WORD.findall(cleaned)]
    if not words or len(words) > SHORT_ANSWER_WORDS:
        return None
    found = []
    for c in choices:
        cw = [w.casefold() for w in _WORD.findall(c)]
        if cw and any(words[i : i + len(cw)] == cw for i in range(len(words) - len(cw) + 1)):
            found.append((c, cw))
    if len(found) != 1:
        return None
    choice, cw = found[0]
    if any(w in _NEGATIONS or (w == "no" and cw != ["no"]) for w in words if w not in cw):
        return None
    return choice


class RubricDagParams(JudgeParams):
    dag: dict[str, Any] | None = None
    """The decision tree: ``{key?, root, nodes: {name: {question, choices, branches}}}``."""
    preset: str | None = None
    """A preset DAG instead: answer_quality | tool_use_quality | safety_refusal | rag_answer."""
    system: str | None = None
    """A system message sent with every question."""
    use_reasoning: bool = True
    """Ask for reasoning with each choice (kept in the path)."""
    max_tool_result_chars: int = 500
    """Tool results longer than this are truncated when the output is a trajectory."""


class RubricDag(JudgeEvaluator[RubricDagParams]):
    """Decision-tree rubric: one judge question per node, the leaf's authored score."""

    name: ClassVar[str] = "rubric_dag"
    description: ClassVar[str] = (
        "Decision-tree rubric: the judge answers one discrete question per node until a leaf with an "
        "authored score; presets available."
    )
    Params = RubricDagParams
    example: ClassVar[dict[str, Any]] = {"preset": "answer_quality", "judge": "gpt4o_mini"}

    def default_key(self) -> str:
        dag = self.params.dag
        if isinstance(dag, dict) and dag.get("key"):
            return str(dag["key"])
        if self.params.preset in RUBRIC_PRESETS:
            return str(RUBRIC_PRESETS[self.params.preset].get("key") or self.params.preset)
        return self.name

    def setup(self) -> None:
        p = self.params
        if (p.dag is None) == (p.preset is None):
            raise ConfigError(f"evaluator {self.name!r}: give exactly one of params.dag and params.preset")
        if p.preset is not None:
            if p.preset not in RUBRIC_PRESETS:
                raise ConfigError(
                    f"evaluator {self.name!r}: params.preset: unknown preset {p.preset!r}; "
                    f"available: {', '.join(RUBRIC_PRESETS)}"
                )
            self.dag = parse_dag(RUBRIC_PRESETS[p.preset], f"evaluator {self.name!r}: preset {p.preset!r}")
        else:
            self.dag = parse_dag(p.dag, f"evaluator {self.name!r}: params.dag")
        self._template = load_template("_rubric_node")

    # ------------------------------------------------------------------ requests

    def context_for(self, trace: Trace) -> PromptText:
        """What the judge is shown: each part in its tags, the trace's text :func:`delimit`-ed."""
        parts = []
        task = input_value(trace)
        if task is not None and task != "":
            parts.append(f"Task / input:\n<input>\n{delimit(as_text(task))}\n</input>")
        ctx = context_text(trace.context)
        if ctx:
            parts.append(f"Retrieved context:\n<context>\n{delimit(ctx)}\n</context>")
        if trace.final_output is None and not trace.messages:
            raise EvaluatorError("the trace has no output to evaluate")
        output = render_trace_output(trace, "auto", self.params.max_tool_result_chars)
        parts.append(f"Output to evaluate:\n<output>\n{delimit(output)}\n</output>")
        if trace.reference is not None:
            reference = render_trace_output(trace.reference, "auto")
            parts.append(f"Reference / expected:\n<reference>\n{delimit(reference)}\n</reference>")
        return PromptText("\n\n".join(parts))

    def node_request(self, node: Node, context: str) -> JudgeRequest:
        text = format_template(
            self._template,
            {"context": context, "question": PromptText(node.question), "options": PromptText(", ".join(node.choices))},
        )
        messages: list[dict[str, Any]] = []
        if self.params.system:
            messages.append({"role": "system", "content": self.params.system})
        messages.append({"role": "user", "content": text})
        props: dict[str, Any] = {}
        if self.params.use_reasoning:
            props["reasoning"] = reasoning_property()
        props["choice"] = {
            "type": "string",
            "enum": list(node.choices),
            "description": "Exactly one allowed option.",
        }
        schema = {
            "type": "object",
            "additionalProperties": False,
            "properties": props,
            "required": list(props),
        }
        return self.request(messages, schema)

    def requests_for(self, trace: Trace) -> list[JudgeRequest]:
        context = self.context_for(trace)
        return [self.node_request(node, context) for node in self.dag.longest_path()]

    # ------------------------------------------------------------------ traversal

    @staticmethod
    def _answer(data: dict[str, Any] | None, text: str) -> tuple[str, str | None]:
        """The judge's raw choice text and reasoning."""
        obj = data if data is not None else extract_json_object(text or "")
        if obj is not None:
            raw = next((obj[k] for k in ("choice", "answer", "option") if k in obj), None)
            reasoning = obj.get("reasoning")
            if raw is not None:
                return str(raw), reasoning if isinstance(reasoning, str) else None
        body = strip_thinking(text or "")
        lines = [ln for ln in body.splitlines() if ln.strip()]
        return (lines[-1] if lines else ""), body or None

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        context = self.context_for(trace)
        path: list[dict[str, Any]] = []
        node = self.dag.nodes[self.dag.root]
        while True:
            try:
                response = await calls.complete(self.node_request(node, context))
            except JudgeError as exc:
                return self.error_result(exc, calls, path=path, node=node.name)
            raw, reasoning = self._answer(response.data, response.text)
            choice = match_choice(raw, node.choices)
            if choice is None:
                perr = VerdictParseError(
                    f"the judge gave no valid choice at node {node.name!r} (answered {raw[:80]!r}; "
                    f"allowed: {', '.join(node.choices)})",
                    raw=response.text[:4000] if response.text else raw,
                )
                return self.error_result(perr, calls, path=path, node=node.name)
            path.append({"node": node.name, "question": node.question, "choice": choice, "reasoning": reasoning})
            target = node.branches[choice]
            if isinstance(target, Leaf):
                comment = target.label or f"score={target.score:g}"
                return Result(
                    self.key,
                    target.score,
                    target.label if target.label is not None else target.score,
                    comment,
                    {"path": path, "leaf": {"score": target.score, "label": target.label}},
                )
            node = self.dag.nodes[target]


RubricDag.__doc__ = f"{RubricDag.__doc__}\n\nPresets (``preset: NAME``): {', '.join(RUBRIC_PRESETS)}."

__all__ = ["RubricDag", "RubricDagParams", "match_choice", "parse_dag"]
