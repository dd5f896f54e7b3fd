"""Write tests/conformance/golden/trajectory.json.gz: reference-library results for trajectory match.

Run with the python that has openevals, agentevals and potato installed (never a dependency of
assay):

    /tmp/refvenv/bin/python tests/conformance/generate_trajectory_golden.py [--n 400]

For every case (a few hundred generated agent traces from ``benchmarks/gen_corpus.py`` plus a
hand-written table of edge cases) and every configuration (mode × args mode, plus per-tool
overrides), it records:

* ``O``: openevals ``create_trajectory_match_evaluator``;
* ``A``: agentevals ``create_trajectory_match_evaluator``;
* ``P``: potato ``TrajectoryMatchEvaluator``;
* ``D``: for configurations with field-path overrides only: assay's documented field-path rule
  (missing on both sides → match, missing on one side → mismatch, list indices allowed) plugged
  into openevals' own machinery as a callable override, so everything except that rule is
  openevals' behaviour.

Each result is one character: ``T`` pass, ``F`` fail, ``E`` the library raised. Edge cases may also
carry ``assay``: the expected assay result where assay deliberately differs (``C`` = ConfigError
when the evaluator is built, ``N`` = score None), with ``why`` pointing to docs/semantics.md.
The file stores the inputs too, so the test needs neither the generator nor the references.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import importlib.util
import json
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
GOLDEN = HERE / "golden" / "trajectory.json.gz"

MODES = ("strict", "unordered", "subset", "superset")
ARGS = ("exact", "ignore", "subset", "superset")


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


CALLABLES: dict[str, Any] = _load(HERE / "_trajectory_callables.py", "_trajectory_callables").CALLABLES

# --------------------------------------------------------------------------------------------
# configurations

BASE_CONFIGS: list[dict[str, Any]] = [
    {"id": f"{m}/{a}", "mode": m, "args": a, "overrides": None} for m in MODES for a in ARGS
]
#: Overrides exercised on the generated corpus (tools from gen_corpus.TOOLS).
CORPUS_OVERRIDE_CONFIGS: list[dict[str, Any]] = [
    {
        "id": "strict/exact+search_web:ignore",
        "mode": "strict",
        "args": "exact",
        "overrides": {"search_web": "ignore"},
    },
    {
        "id": "unordered/ignore+sql_query:exact",
        "mode": "unordered",
        "args": "ignore",
        "overrides": {"sql_query": "exact"},
    },
    {
        "id": "superset/exact+search_web:paths",
        "mode": "superset",
        "args": "exact",
        "overrides": {"search_web": ["query", "filters.lang"]},
    },
    {
        "id": "unordered/exact+get_order:paths",
        "mode": "unordered",
        "args": "exact",
        "overrides": {"get_order": ["order_id"], "issue_refund": ["order_id", "amount"]},
    },
    {
        "id": "subset/subset+create_event:paths",
        "mode": "subset",
        "args": "subset",
        "overrides": {"create_event": ["event.title", "event.attendees.0.email"]},
    },
    {
        "id": "strict/superset+create_ticket:same_keys",
        "mode": "strict",
        "args": "superset",
        "overrides": {"create_ticket": {"callable": "same_keys"}},
    },
    {
        "id": "subset/exact+send_email:out_has_more_keys",
        "mode": "subset",
        "args": "exact",
        "overrides": {
            "send_email": {"callable": "out_has_more_keys"},
            "search_web": {"callable": "out_has_more_keys"},
        },
    },
    {
        "id": "unordered/exact+search_web:out_has_more_keys",
        "mode": "unordered",
        "args": "exact",
        "overrides": {"search_web": {"callable": "out_has_more_keys"}},
    },
]
#: Overrides used by edge cases (tool "f").
EDGE_OVERRIDE_CONFIGS: list[dict[str, Any]] = (
    [{"id": f"{m}/exact+f:paths(a.b)", "mode": m, "args": "exact", "overrides": {"f": ["a.b"]}} for m in MODES]
    + [
        {
            "id": "strict/exact+f:paths(items.0.id)",
            "mode": "strict",
            "args": "exact",
            "overrides": {"f": ["items.0.id"]},
        },
        {
            "id": "strict/exact+f:paths(items.1.id)",
            "mode": "strict",
            "args": "exact",
            "overrides": {"f": ["items.1.id"]},
        },
        {"id": "strict/exact+f:paths([])", "mode": "strict", "args": "exact", "overrides": {"f": []}},
        {"id": "strict/exact+f:fuzzy", "mode": "strict", "args": "exact", "overrides": {"f": "fuzzy"}},
        {"id": "strict/exact+f:5", "mode": "strict", "args": "exact", "overrides": {"f": 5}},
        {"id": "strict/exact+f:ignore", "mode": "strict", "args": "exact", "overrides": {"f": "ignore"}},
    ]
    + [
        {
            "id": f"{m}/exact+f:out_has_more_keys",
            "mode": m,
            "args": "exact",
            "overrides": {"f": {"callable": "out_has_more_keys"}},
        }
        for m in MODES
    ]
)


def has_paths(cfg: dict[str, Any]) -> bool:
    return any(isinstance(v, list) and v for v in (cfg["overrides"] or {}).values())


# --------------------------------------------------------------------------------------------
# assay's documented field-path rule (the "D" column)

_MISSING = object()


def _resolve(value: Any, steps: list[str]) -> Any:
    for step in steps:
        if isinstance(value, dict):
            if step not in value:
                return _MISSING
            value = value[step]
        elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
            value = value[int(step)]
        else:
            return _MISSING
    return value


def documented_paths(paths: list[str]) -> Any:
    def match(out: dict[str, Any], ref: dict[str, Any]) -> bool:
        for p in paths:
            a, b = _resolve(out, p.split(".")), _resolve(ref, p.split("."))
            if a is _MISSING and b is _MISSING:
                continue
            if a is _MISSING or b is _MISSING or a != b:
                return False
        return True

    return match


# --------------------------------------------------------------------------------------------
# running the references


def _overrides_for(cfg: dict[str, Any], documented: bool = False) -> dict[str, Any] | None:
    if cfg["overrides"] is None:
        return None
    out: dict[str, Any] = {}
    for tool, spec in cfg["overrides"].items():
        if isinstance(spec, dict):
            out[tool] = CALLABLES[spec["callable"]]
        elif documented and isinstance(spec, list) and spec:
            out[tool] = documented_paths(spec)
        else:
            out[tool] = spec
    return out


def _code(fn: Any) -> str:
    try:
        score = fn()
    except Exception:
        return "E"
    if score is None:
        return "N"
    return "T" if bool(score) else "F"


class References:
    def __init__(self) -> None:
        from agentevals.trajectory.match import create_trajectory_match_evaluator as a_create
        from openevals import create_trajectory_match_evaluator as o_create
        from potato.evaluators import TrajectoryMatchEvaluator

        self.o_create, self.a_create, self.p_cls = o_create, a_create, TrajectoryMatchEvaluator
        self._cache: dict[tuple[str, str], Any] = {}

    def evaluator(self, lib: str, cfg: dict[str, Any]) -> Any:
        key = (lib, cfg["id"])
        if key not in self._cache:
            if lib == "O":
                ev = self.o_create(
                    trajectory_match_mode=cfg["mode"],
                    tool_args_match_mode=cfg["args"],
                    tool_args_match_overrides=_overrides_for(cfg),
                )
            elif lib == "D":
                ev = self.o_create(
                    trajectory_match_mode=cfg["mode"],
                    tool_args_match_mode=cfg["args"],
                    tool_args_match_overrides=_overrides_for(cfg, documented=True),
                )
            elif lib == "A":
                ev = self.a_create(
                    trajectory_match_mode=cfg["mode"],
                    tool_args_match_mode=cfg["args"],
                    tool_args_match_overrides=_overrides_for(cfg),
                )
            else:
                ev = self.p_cls(  # calling a potato evaluator is calling its evaluate()
                    mode=cfg["mode"],
                    tool_args_match_mode=cfg["args"],
                    tool_args_match_overrides=_overrides_for(cfg),
                )
            self._cache[key] = ev
        return self._cache[key]

    def run(self, lib: str, cfg: dict[str, Any], outputs: Any, reference: Any) -> str:
        ev = self.evaluator(lib, cfg)
        # agentevals mutates its inputs; every library gets its own copy.
        o, r = copy.deepcopy(outputs), copy.deepcopy(reference)
        if lib == "P":
            return _code(lambda: ev(outputs=o, reference_outputs=r).score)
        return _code(lambda: ev(outputs=o, reference_outputs=r)["score"])


# --------------------------------------------------------------------------------------------
# generated cases


def _compact(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop bulky texts (content is never compared) and shorten ids: keeps the golden small."""
    out = []
    ids: dict[str, str] = {}
    for m in msgs:
        m = copy.deepcopy(m)
        if isinstance(m.get("content"), str):
            m["content"] = m["content"][:12]
        for c in m.get("tool_calls") or []:
            c["id"] = ids.setdefault(c["id"], f"c{len(ids)}")
        if "tool_call_id" in m:
            m["tool_call_id"] = ids.setdefault(m["tool_call_id"], f"c{len(ids)}")
        out.append(m)
    return out


def generated_cases(n: int, seed: int) -> list[dict[str, Any]]:
    gen = _load(ROOT / "benchmarks" / "gen_corpus.py", "gen_corpus")
    cases = []
    for i in range(n):
        rec = gen.make_record(seed, i, "flat")
        out, ref = _compact(rec["messages"]), _compact(rec["reference_outputs"])
        if i % 5 == 0:  # some records wrap the lists as {"messages": [...]}
            out, ref = {"messages": out}, {"messages": ref}
        cases.append(
            {
                "id": f"gen-{i}",
                "kind": "generated",
                "variant": rec["metadata"]["variant"],
                "outputs": out,
                "reference": ref,
            }
        )
    return cases


# --------------------------------------------------------------------------------------------
# edge cases


def call(name: str, args: Any = None, cid: str | None = None) -> dict[str, Any]:
    raw = args if isinstance(args, str) or args is None else json.dumps(args)
    return {
        "id": cid or f"id_{name}",
        "type": "function",
        "function": {"name": name, "arguments": raw if args is not None else "{}"},
    }


def ai(*calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        m["tool_calls"] = list(calls)
    return m


def tool(cid: str = "id", content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


F, G = call("f", {"x": 1}), call("g", {"y": 2})
Q = call("search", {"q": "cats"})
QL = call("search", {"q": "cats", "limit": 5})
FX, FXY = call("f", {"x": 1}), call("f", {"x": 1, "y": 2})
EDGE_CFGS = [c["id"] for c in BASE_CONFIGS]
PATH_CFGS = [c["id"] for c in EDGE_OVERRIDE_CONFIGS if c["id"].split("+")[1].startswith("f:paths(a.b)")]


def E(
    name: str,
    outputs: Any,
    reference: Any,
    why: str = "",
    assay: dict[str, str] | None = None,
    configs: list[str] | None = None,
    potato_differs: str = "",
) -> dict[str, Any]:
    case = {
        "id": f"edge-{name}",
        "kind": "edge",
        "outputs": outputs,
        "reference": reference,
        "configs": configs or EDGE_CFGS,
    }
    if assay:
        case["assay"] = assay
        case["why"] = why
    if potato_differs:
        case["potato_differs"] = potato_differs
    return case


RAW_WHY = "docs/semantics.md: invalid JSON args are kept as {'_raw': text} (openevals raises JSONDecodeError)"


def _all(code: str) -> dict[str, str]:
    return dict.fromkeys(EDGE_CFGS, code)


def _modes(code: str, *modes: str) -> dict[str, str]:
    return {c: code for c in EDGE_CFGS if c.split("/")[0] in modes}


def edge_cases() -> list[dict[str, Any]]:
    cases = [
        # --- §1.8 matrix
        E("swapped-across-messages", [ai(F), tool(), ai(G), tool()], [ai(G), tool(), ai(F), tool()]),
        E("swapped-inside-message", [ai(F, G), tool(), tool()], [ai(G, F), tool(), tool()]),
        E("two-in-one-vs-split", [ai(F, G), tool(), tool()], [ai(F), tool(), ai(G), tool()]),
        E("extra-tool-and-final", [user(), ai(F), tool(), ai(content="done")], [user(), ai(F)]),
        E("no-tools-different-count", [user(), ai(content="x")], [user()]),
        E("system-vs-user", [{"role": "system", "content": "s"}], [user()]),
        E("out-q-vs-ref-q-limit", [ai(Q)], [ai(QL)]),
        E("out-q-limit-vs-ref-q", [ai(QL)], [ai(Q)]),
        E(
            "greedy-trap-across-messages",
            [ai(FXY), tool(), ai(FX), tool()],
            [ai(FX), tool(), ai(FXY), tool()],
        ),
        E("greedy-trap-inside-message", [ai(FXY, FX), tool(), tool()], [ai(FX, FXY), tool(), tool()]),
        # --- duplicates
        E("dup-out-AA-ref-A-same-message", [ai(F, F)], [ai(F)]),
        E("dup-out-AA-ref-A-separate", [ai(F), tool(), ai(F), tool()], [ai(F), tool()]),
        E("dup-out-A-ref-AA", [ai(F), tool()], [ai(F), tool(), ai(F), tool()]),
        E("dup-both-AA", [ai(F), ai(F)], [ai(F), ai(F)]),
        E("same-message-count-ref-has-extra-call", [ai(F)], [ai(F, G)]),
        E("same-message-count-out-has-extra-call", [ai(F, G)], [ai(F)]),
        E("same-message-count-ref-extra-same-call", [ai(F)], [ai(F, F)]),
        # --- empty sides
        E("empty-both", [], []),
        E("no-calls-both-different-messages", [user("a"), ai(content="b")], [user("c")]),
        E("out-no-calls-ref-calls", [user(), ai(content="x")], [user(), ai(F)]),
        E("out-calls-ref-no-calls", [user(), ai(F)], [user(), ai(content="x")]),
        E("outputs-null-vs-empty", None, [], why="outputs None is an empty trajectory in every library"),
        E(
            "reference-null",
            [ai(F)],
            None,
            why="docs/semantics.md: no reference → score None (openevals compares with [])",
            assay=_all("N"),
        ),
        # --- argument shapes
        E(
            "dict-arguments",
            [ai({"id": "1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}})],
            [ai(F)],
        ),
        E(
            "key-order-and-whitespace",
            [ai(call("f", '{ "b": 2,  "a": 1 }'))],
            [ai(call("f", '{"a":1,"b":2}'))],
        ),
        E("int-vs-float", [ai(call("f", {"n": 1}))], [ai(call("f", {"n": 1.0}))]),
        E("true-vs-one", [ai(call("f", {"n": True}))], [ai(call("f", {"n": 1}))]),
        E("nested-list-order", [ai(call("f", {"l": [1, 2]}))], [ai(call("f", {"l": [2, 1]}))]),
        E(
            "nested-extra-key",
            [ai(call("f", {"o": {"a": 1, "b": 2}, "k": 1}))],
            [ai(call("f", {"o": {"a": 1}, "k": 1}))],
        ),
        E("empty-args-both", [ai(call("f", "{}"))], [ai(call("f", {}))]),
        E("name-case", [ai(call("F", {"x": 1}))], [ai(F)]),
        E(
            "langchain-style-call",
            [ai({"name": "f", "args": {"x": 1}, "id": "1"})],
            [ai(F)],
            potato_differs="potato drops the args of LangChain-style tool calls",
        ),
        E(
            "langchain-roles",
            [{"role": "human", "content": "q"}, {"role": "ai", "content": "", "tool_calls": [F]}],
            [user("q"), ai(F)],
        ),
        E(
            "type-key-instead-of-role",
            [{"type": "human", "content": "q"}],
            [user("q")],
            potato_differs="potato needs a role key",
        ),
        E("tool-calls-empty-list-vs-absent", [ai(content="x") | {"tool_calls": []}], [ai(content="x")]),
        E(
            "content-blocks",
            [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, ai(F)],
            [user(), ai(F)],
        ),
        E("tool-message-without-id", [ai(F), {"role": "tool", "content": "r"}], [ai(F), tool()]),
        E(
            "developer-vs-system",
            [{"role": "developer", "content": "d"}],
            [{"role": "system", "content": "d"}],
        ),
        # --- documented differences
        E(
            "function-role-vs-tool",
            [ai(F), {"role": "function", "name": "f", "content": "r"}],
            [ai(F), tool()],
            why="docs/semantics.md: the legacy 'function' role is a tool-result message in assay",
            assay=_modes("T", "strict"),
        ),
        E(
            "legacy-function-call",
            [ai() | {"function_call": {"name": "f", "arguments": "{}"}}],
            [ai() | {"function_call": {"name": "g", "arguments": "{}"}}],
            why="docs/semantics.md: assay reads the legacy function_call (openevals/agentevals drop it)",
            assay=_all("F"),
        ),
        E(
            "legacy-function-call-vs-tool-calls",
            [ai() | {"function_call": {"name": "f", "arguments": '{"x": 1}'}}],
            [ai(F)],
            why="docs/semantics.md: assay reads the legacy function_call (openevals/agentevals drop it)",
            assay=_all("T"),
        ),
        E(
            "invalid-json-args-equal",
            [ai(call("f", "not json"))],
            [ai(call("f", "not json"))],
            why=RAW_WHY,
            assay=_all("T"),
        ),
        E(
            "invalid-json-args-differ",
            [ai(call("f", "not json"))],
            [ai(call("f", "other"))],
            why=RAW_WHY,
            assay={c: ("T" if c.endswith("/ignore") else "F") for c in EDGE_CFGS},
        ),
        E(
            "empty-string-args",
            [ai(call("f", ""))],
            [ai(call("f", "{}"))],
            why="docs/semantics.md: empty arguments are {} (openevals raises JSONDecodeError)",
            assay=_all("T"),
        ),
        E(
            "non-object-json-args",
            [ai(call("f", "[1, 2]"))],
            [ai(call("f", "[1, 2]"))],
            why="docs/semantics.md: non-object JSON args are kept as {'_value': parsed} (openevals raises)",
            assay=_all("T"),
        ),
        E(
            "unknown-role",
            [{"role": "robot", "content": "x"}],
            [{"role": "robot", "content": "x"}],
            why="an unknown role cannot be normalized: an error in openevals too",
            assay=_all("E"),
            potato_differs="potato takes any role",
        ),
        E(
            "message-without-role",
            [{"content": "x"}],
            [user()],
            why="a message without a role cannot be normalized: an error in openevals too",
            assay=_all("E"),
            potato_differs="potato defaults the role",
        ),
    ]
    # --- field-path overrides (the D column decides), unknown / invalid override values
    cases += [
        E(
            "path-equal-other-keys-differ",
            [ai(call("f", {"a": {"b": 1, "c": 1}}))],
            [ai(call("f", {"a": {"b": 1, "c": 2}}))],
            configs=PATH_CFGS,
        ),
        E(
            "path-values-differ",
            [ai(call("f", {"a": {"b": 1}}))],
            [ai(call("f", {"a": {"b": 2}}))],
            configs=PATH_CFGS,
        ),
        E("path-missing-both", [ai(call("f", {"x": 1}))], [ai(call("f", {"x": 2}))], configs=PATH_CFGS),
        E(
            "path-null-vs-missing",
            [ai(call("f", {"a": {"b": None}}))],
            [ai(call("f", {"a": {}}))],
            configs=PATH_CFGS,
        ),
        E(
            "path-null-both",
            [ai(call("f", {"a": {"b": None}}))],
            [ai(call("f", {"a": {"b": None}}))],
            configs=PATH_CFGS,
        ),
        E("path-through-scalar", [ai(call("f", {"a": 3}))], [ai(call("f", {"a": 3}))], configs=PATH_CFGS),
        E(
            "path-list-index",
            [ai(call("f", {"items": [{"id": 1}, {"id": 2}]}))],
            [ai(call("f", {"items": [{"id": 1}, {"id": 3}]}))],
            configs=["strict/exact+f:paths(items.0.id)", "strict/exact+f:paths(items.1.id)"],
        ),
        E(
            "path-empty-list-is-default",
            [ai(call("f", {"x": 1}))],
            [ai(call("f", {"x": 2}))],
            configs=["strict/exact+f:paths([])"],
        ),
        E(
            "override-ignore",
            [ai(call("f", {"x": 1}), G)],
            [ai(call("f", {"x": 2}), G)],
            configs=["strict/exact+f:ignore"],
        ),
        E(
            "override-unknown-string",
            [ai(call("f", {"x": 1}))],
            [ai(call("f", {"x": 2}))],
            configs=["strict/exact+f:fuzzy"],
            why="docs/semantics.md: an unknown override string is a ConfigError (openevals: ignore)",
            assay={"strict/exact+f:fuzzy": "C"},
        ),
        E(
            "override-invalid-value",
            [ai(call("f", {"x": 1}))],
            [ai(call("f", {"x": 1}))],
            configs=["strict/exact+f:5"],
            why="docs/semantics.md: an invalid override is a ConfigError at build (openevals raises later)",
            assay={"strict/exact+f:5": "C"},
        ),
        E(
            "callable-orientation-out-more",
            [ai(call("f", {"a": 1, "b": 2}))],
            [ai(call("f", {"a": 1}))],
            configs=[c["id"] for c in EDGE_OVERRIDE_CONFIGS if "out_has_more_keys" in c["id"]],
        ),
        E(
            "callable-orientation-ref-more",
            [ai(call("f", {"a": 1}))],
            [ai(call("f", {"a": 1, "b": 2}))],
            configs=[c["id"] for c in EDGE_OVERRIDE_CONFIGS if "out_has_more_keys" in c["id"]],
        ),
    ]
    return cases


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=500, help="generated traces (default 500)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("-o", "--output", default=str(GOLDEN))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    refs = References()
    configs = {c["id"]: c for c in BASE_CONFIGS + CORPUS_OVERRIDE_CONFIGS + EDGE_OVERRIDE_CONFIGS}
    corpus_cfgs = [c["id"] for c in BASE_CONFIGS + CORPUS_OVERRIDE_CONFIGS]
    cases = generated_cases(args.n, args.seed)
    for c in cases:
        c["configs"] = corpus_cfgs
    cases += edge_cases()

    stats: Counter[str] = Counter()
    for case in cases:
        res: dict[str, list[str]] = {"O": [], "A": [], "P": [], "D": []}
        for cid in case["configs"]:
            cfg = configs[cid]
            for lib in ("O", "A", "P"):
                res[lib].append(refs.run(lib, cfg, case["outputs"], case["reference"]))
            res["D"].append(refs.run("D", cfg, case["outputs"], case["reference"]) if has_paths(cfg) else "-")
            o, a, d = res["O"][-1], res["A"][-1], res["D"][-1]
            stats["O==A" if o == a else "O!=A"] += 1
            stats[f"O={o}"] += 1
            if d != "-" and o == a and d != o:
                # legitimate only with list-index paths (openevals cannot index lists) or when
                # agentevals fails elsewhere for its own reason (the argument-order swap)
                print(f"note: {case['id']} {cid}: documented rule {d}, O==A={o}", file=sys.stderr)
        case["results"] = {k: "".join(v) for k, v in res.items()}

    golden = {
        "about": "trajectory match results of openevals (O), agentevals (A), potato (P) and assay's "
        "documented field-path rule on openevals' machinery (D); written by generate_trajectory_golden.py",
        "libraries": _versions(),
        "configs": list(configs.values()),
        "cases": cases,
    }
    raw = json.dumps(golden, separators=(",", ":"), ensure_ascii=False).encode()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    print(
        f"{out}: {len(cases)} cases, {out.stat().st_size / 1024:.0f} KiB; {dict(sorted(stats.items()))}",
        file=sys.stderr,
    )
    return 0


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("openevals", "agentevals", "potato-annotation", "langchain-core")}


if __name__ == "__main__":
    raise SystemExit(main())
