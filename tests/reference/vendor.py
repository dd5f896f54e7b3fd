"""Vendor openevals' and agentevals' Python test suites, imports rewritten to ``assay.compat``.

The only change to an upstream file is the rewrite of :func:`rewrite` (import lines, and dotted
``"openevals.…"`` strings such as ``mock.patch`` targets) plus a two-line header naming the
source; :func:`pristine` undoes both, and ``manifest.json`` records each upstream file's git blob
id, so ``tests/reference/test_vendored.py`` proves the vendored text is upstream's apart from the
rewrite. Commands (see README.md)::

    python tests/reference/vendor.py vendor --openevals-git DIR --openevals-sdist TAR --agentevals-git DIR
    python tests/reference/vendor.py pristine DEST        # the upstream files, exactly
    python tests/reference/vendor.py classify RESULTS_DIR # run modes and exclusions from reference junit files
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
SUITES = {"openevals": "openevals_suite", "agentevals": "agentevals_suite"}

OPENEVALS = {
    "repository": "https://github.com/langchain-ai/openevals",
    "commit": "bdb122e440070b3afe86717b4be7da23564f198e",
    "sdist": "openevals-0.2.2.tar.gz",
    "package": "openevals==0.2.2",
}
AGENTEVALS = {
    "repository": "https://github.com/langchain-ai/agentevals",
    "commit": "946ad15b9f2ce9bc9843edd2bb773bd07d78ca7e",
    "package": "agentevals==0.0.9",
}

_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)(openevals|agentevals)\b", re.M)
_DOTTED = re.compile(r"""(["'])(openevals|agentevals)\.""")
HEADER = (
    "# assay: vendored from {source} ({license}); only the import lines are rewritten (tests/reference/vendor.py).\n"
)


def rewrite(text: str) -> str:
    """``from openevals.x import y`` → ``from assay.compat.openevals.x import y`` (and agentevals),
    ``"openevals.llm.init_chat_model"`` → ``"assay.compat.openevals.llm.init_chat_model"``."""
    text = _IMPORT.sub(lambda m: f"{m[1]}{m[2]}{m[3]}assay.compat.{m[4]}", text)
    return _DOTTED.sub(r"\1assay.compat.\2.", text)


def pristine(text: str) -> str:
    """The upstream text of a vendored file (the header dropped, the rewrite undone)."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("# assay: vendored from "):
        lines.pop(0)
    return (
        "".join(lines).replace("assay.compat.openevals", "openevals").replace("assay.compat.agentevals", "agentevals")
    )


def blob_id(data: bytes) -> str:
    """git's object id of a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git_files(git_dir: str, commit: str, prefix: str) -> dict[str, bytes]:
    names = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", commit, prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {
        n[len(prefix) :]: subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{n}"], check=True, capture_output=True
        ).stdout
        for n in names
        if n.endswith(".py")
    }


def _sdist_files(tar: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(tar) as tf:
        for m in tf.getmembers():
            parts = m.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith("tests/") and m.name.endswith(".py"):
                f = tf.extractfile(m)
                assert f is not None
                out[parts[1][len("tests/") :]] = f.read()
    return out


def vendor(args: argparse.Namespace) -> None:
    manifest: dict[str, Any] = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    files: dict[str, Any] = {}
    oe = _git_files(args.openevals_git, OPENEVALS["commit"], "python/tests/")
    oe_sources = {name: f"{OPENEVALS['repository']}@{OPENEVALS['commit'][:12]} python/tests/{name}" for name in oe}
    # the release's sdist carries newer versions of the top-level test files (and no sub-directories)
    for name, data in _sdist_files(args.openevals_sdist).items():
        oe[name] = data
        oe_sources[name] = f"{OPENEVALS['sdist']} tests/{name}"
    ae = _git_files(args.agentevals_git, AGENTEVALS["commit"], "python/tests/")
    ae_sources = {name: f"{AGENTEVALS['repository']}@{AGENTEVALS['commit'][:12]} python/tests/{name}" for name in ae}
    for suite, contents, sources in (("openevals", oe, oe_sources), ("agentevals", ae, ae_sources)):
        root = HERE / SUITES[suite]
        for name, data in sorted(contents.items()):
            dest = root / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            header = HEADER.format(source=sources[name], license=f"MIT, tests/reference/LICENSE.{suite}")
            dest.write_text(header + rewrite(data.decode("utf-8")), encoding="utf-8")
            files[f"{SUITES[suite]}/{name}"] = {"source": sources[name], "blob": blob_id(data)}
        for d in [root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
            init = d / "__init__.py"
            rel = init.relative_to(HERE).as_posix()
            if rel not in files:  # packages, so that same-named test files do not collide
                init.write_text("")
                files[rel] = {"source": "assay (empty package marker)", "blob": None}
    manifest["upstream"] = {"openevals": OPENEVALS, "agentevals": AGENTEVALS}
    manifest["files"] = files
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def write_pristine(args: argparse.Namespace) -> None:
    manifest = json.loads(MANIFEST.read_text())
    for rel, info in manifest["files"].items():
        if info["blob"] is None:
            continue
        data = pristine((HERE / rel).read_text(encoding="utf-8")).encode("utf-8")
        assert blob_id(data) == info["blob"], rel
        dest = Path(args.dest) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def position_keys(ids: list[str]) -> list[str]:
    """Test ids with each parameter set named by its position: ``f[<id>]`` → ``f[2]`` for the
    third case of ``f`` (pytest versions write long parameter ids differently; the order is the
    same). ``ids`` are in collection order."""
    seen: dict[str, int] = {}
    out = []
    for nodeid in ids:
        base, bracket, _ = nodeid.partition("[")
        if not bracket:
            out.append(nodeid)
            continue
        seen[base] = seen.get(base, -1) + 1
        out.append(f"{base}[{seen[base]}]")
    return out


def _outcomes(path: Path) -> dict[str, str]:
    """``module::test`` (``module::`` for a module that failed to import) → ``passed`` or the
    first line of the failure / error / skip message."""
    names: list[str] = []
    outcomes: list[str] = []
    for tc in ET.parse(path).iter("testcase"):
        module = tc.get("classname") or (tc.get("name") or "")
        test = tc.get("name", "") if tc.get("classname") else ""
        names.append(f"{module}::{test}")
        problems = [c for c in tc if c.tag in ("failure", "error", "skipped")]
        if problems:
            message = (problems[0].get("message") or problems[0].text or "").strip().splitlines() or [""]
            outcomes.append(f"{problems[0].tag}: {message[0][:160]}")
        else:
            outcomes.append("passed")
    return dict(zip(position_keys(names), outcomes, strict=True))


def classify(args: argparse.Namespace) -> None:
    """Run modes from the reference's junit files ``{suite}-ref-{yes,no}.xml`` (pristine files run
    from a directory ``tests`` against the real packages): the mode each test passes in
    (``yes`` when both), and the tests that pass in neither (listed with their outcome)."""
    manifest = json.loads(MANIFEST.read_text())
    run: dict[str, str] = {}
    excluded: dict[str, str] = {}
    for suite, package in SUITES.items():
        yes = _outcomes(Path(args.results) / f"{suite}-ref-yes.xml")
        no = _outcomes(Path(args.results) / f"{suite}-ref-no.xml")
        for name in sorted(set(yes) | set(no)):
            module, _, test = name.partition("::")
            parts = module.removeprefix("tests.").split(".")
            cut = next(
                i
                for i in range(len(parts), 0, -1)
                if (HERE / package / "/".join(parts[:i])).with_suffix(".py").exists()
            )
            nodeid = "::".join([f"{package}/{'/'.join(parts[:cut])}.py", *parts[cut:], *([test] if test else [])])
            if yes.get(name) == "passed":
                run[nodeid] = "yes"
            elif no.get(name) == "passed":
                run[nodeid] = "no"
            else:
                y, n = yes.get(name, "absent"), no.get(name, "absent")
                excluded[nodeid] = y if y == n else f"yes: {y} / no: {n}"
    manifest["run"] = run
    manifest["excluded"] = excluded
    # excluded tests that pass on assay: keep those still excluded (rerun them against assay to update)
    manifest["beyond"] = {k: v for k, v in manifest.get("beyond", {}).items() if k in excluded}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


#: Why a test is excluded, from what it did on the reference in both verdict modes.
REASONS = (
    (
        "collection failure",
        "E2B: the module imports `e2b_code_interpreter`, runs code in an E2B sandbox (network, key)",
    ),
    ("LangSmithConnectionError", "LangSmith: hub prompts or `evaluate()` on a LangSmith dataset (network)"),
    ("openaipublic.blob.core.windows.net", "network: the reference downloads tiktoken's encoding at run time"),
    ("Google model tests are temporarily disabled", "skipped upstream (Google model tests disabled)"),
    ("Requires additional auth", "skipped upstream (needs a LangGraph deployment)"),
    (
        "Event loop is closed",
        "fails on the reference in both modes: `RuntimeError: Event loop is closed` (a LangChain model's async client "
        "reused across event loops)",
    ),
    (
        "Error code: 404",
        "fails on the reference in both modes: langchain-openai sends that model to OpenAI's Responses API, which the "
        "stand-in does not serve (404)",
    ),
    ("assert 1.0 < 1", "verdict-dependent: asserts a score strictly between 0 and 1 (all-yes and all-no cannot)"),
    ("stand-in reasoning", "verdict-dependent: asserts the model's free-text label (a language name)"),
    (
        "assert False",
        "needs a model that calls tools: the stand-in answers in text, so the agent graph never reaches its tools node",
    ),
)


def reason(outcome: str) -> str:
    for needle, why in REASONS:
        if needle.lower() in outcome.lower():
            return why
    return f"fails on the reference: {outcome}"


def exclusions_markdown(manifest: dict[str, Any]) -> str:
    """The README's list of excluded tests, grouped by reason (generated; checked by test_vendored.py)."""
    groups: dict[str, list[str]] = {}
    for nodeid, outcome in sorted(manifest["excluded"].items()):
        groups.setdefault(reason(outcome), []).append(nodeid)
    beyond = manifest.get("beyond", {})
    lines = []
    for why, ids in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        lines.append(f"- **{why}** ({len(ids)}):")
        lines.extend(f"  - `{i}`" + (f" — passes on assay, runs (`{beyond[i]}`)" if i in beyond else "") for i in ids)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("vendor")
    v.add_argument("--openevals-git", required=True)
    v.add_argument("--openevals-sdist", required=True)
    v.add_argument("--agentevals-git", required=True)
    p = sub.add_parser("pristine")
    p.add_argument("dest")
    c = sub.add_parser("classify")
    c.add_argument("results")
    sub.add_parser("exclusions")
    args = parser.parse_args(argv)
    if args.command == "exclusions":
        print(exclusions_markdown(json.loads(MANIFEST.read_text())), end="")
        return
    {"vendor": vendor, "pristine": write_pristine, "classify": classify}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
