"""The upstream test suites, fetched at test time: nothing of them is kept in this repository.

Each suite's tests ship in a release's sdist on the package index (:data:`SDISTS`, the version and
sha256 pinned). :func:`fetch` downloads it once into a cache directory shared by the test workers
(a file lock keeps two workers from downloading at once), :func:`materialize` extracts its test
files into a temporary directory with the import lines rewritten (:func:`rewrite`,
:func:`rewrite_potato`; nothing else changes, and that is checked), and :func:`run` runs them in a
pytest subprocess with :mod:`tests.reference.plugin` (the stand-in model, each verdict mode) and
returns each test's outcome per mode. ``manifest.json`` (ours) lists, per suite, the tests that
pass on the reference in each mode, and the excluded ones with what they did on the reference.

Commands (see README.md)::

    python tests/reference/upstream.py fetch                 # download the three sdists into the cache
    python tests/reference/upstream.py classify RESULTS_DIR  # manifest from the reference's junit files
    python tests/reference/upstream.py exclusions            # the README's list of exclusions
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MANIFEST = HERE / "manifest.json"

_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)(openevals|agentevals)\b", re.M)
_DOTTED = re.compile(r"""(["'])(openevals|agentevals)\.""")
_POTATO = re.compile(r"^(\s*from\s+)potato(\.evaluators\b)", re.M)


def rewrite(text: str) -> str:
    """``from openevals.x import y`` → ``from assay.compat.openevals.x import y`` (and agentevals),
    ``"openevals.llm.init_chat_model"`` (a ``mock.patch`` target) → ``"assay.compat.openevals.llm.init_chat_model"``."""
    text = _IMPORT.sub(lambda m: f"{m[1]}{m[2]}{m[3]}assay.compat.{m[4]}", text)
    return _DOTTED.sub(r"\1assay.compat.\2.", text)


def rewrite_potato(text: str) -> str:
    """``from potato.evaluators… import`` → ``from assay.compat.potato.evaluators… import``."""
    return _POTATO.sub(r"\1assay.compat.potato\2", text)


@dataclass(frozen=True)
class Sdist:
    """A release whose sdist carries the suite's test files (``folder`` inside the archive)."""

    suite: str
    release: str
    filename: str
    sha256: str
    folder: str
    rewrite: Callable[[str], str]
    #: the verdict modes the suite runs in against the stand-in model ("-": no model, run once)
    modes: tuple[str, ...] = ("yes", "no")

    def members(self) -> dict[str, str]:
        """The suite's test files: ``name`` → path inside the archive."""
        files: list[str] = load_manifest()[self.suite]["files"]
        return {name: f"{self.folder}/{name}" for name in files}


SDISTS = {
    "openevals": Sdist(
        "openevals",
        "openevals==0.2.2",
        "openevals-0.2.2.tar.gz",
        "d999b6d044f41f9f6c517cd83565d9be90df8571074f64c513841b74717c872b",
        "openevals-0.2.2/tests",
        rewrite,
        modes=("yes", "no", "mid"),  # mid: continuous scores strictly between 0 and 1
    ),
    "agentevals": Sdist(
        "agentevals",
        "agentevals==0.0.9",
        "agentevals-0.0.9.tar.gz",
        "35131a5e4b60d2a6ac3203d3d15983aa5f9162b8acb1b8700f9b2c777df1150d",
        "agentevals-0.0.9/tests",
        rewrite,
    ),
    "potato": Sdist(
        "potato",
        "potato-annotation==2.12.1",
        "potato_annotation-2.12.1.tar.gz",
        "fe0c891215030d7e27bca691d1945ce9ecd8d3521ee05a49665e83bcb0732934",
        "potato_annotation-2.12.1/tests/unit",
        rewrite_potato,
        modes=("-",),
    ),
}


def load_manifest() -> dict[str, Any]:  # read on use, so that `classify` can rewrite it
    data: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return data


class Unavailable(Exception):
    """The package index cannot be reached (the caller skips, or fails in CI)."""


def cache_dir() -> Path:
    """Where the sdists are kept between runs and shared by the test workers
    (``ASSAY_REFERENCE_CACHE``, else ``assay-reference-sdists`` in the temporary directory)."""
    folder = Path(os.environ.get("ASSAY_REFERENCE_CACHE") or Path(tempfile.gettempdir()) / "assay-reference-sdists")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(sdist: Sdist) -> Path:
    """The sdist in the cache, downloaded with ``pip download`` if missing; its sha256 checked."""
    folder = cache_dir()
    target = folder / sdist.filename
    with _locked(folder):
        if not target.exists() or sha256(target) != sdist.sha256:
            with tempfile.TemporaryDirectory(dir=folder) as download:
                proc = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                     "--no-build-isolation", "--dest", download, sdist.release],
                    capture_output=True, text=True, timeout=600, check=False,
                )  # fmt: skip
                got = Path(download) / sdist.filename
                if proc.returncode != 0 or not got.exists():
                    raise Unavailable(f"cannot download {sdist.release}: {proc.stderr.strip()[-500:]}")
                os.replace(got, target)
    if sha256(target) != sdist.sha256:
        raise AssertionError(f"{target}: sha256 {sha256(target)}, expected {sdist.sha256}")
    return target


def materialize(sdist: Sdist, archive: Path, dest: Path) -> Path:
    """The suite's test files under ``dest/<suite>_tests``, rewritten; every changed line must be an import
    line or hold a dotted ``"openevals.…"`` string (nothing else of the upstream text changes)."""
    tests = dest / f"{sdist.suite}_tests"
    tests.mkdir(parents=True)
    with tarfile.open(archive) as tf:
        for name, member in sdist.members().items():
            handle = tf.extractfile(member)
            assert handle is not None, member
            original = handle.read().decode("utf-8")
            rewritten = sdist.rewrite(original)
            before, after = original.splitlines(), rewritten.splitlines()
            assert len(before) == len(after)
            for a, b in zip(before, after, strict=True):
                if a != b:
                    assert b.replace("assay.compat.", "") == a, (name, a)
            (tests / name).write_text(rewritten, encoding="utf-8")
    return tests


def run(sdist: Sdist, tests: Path, select: dict[str, list[str]] | None, timeout: float = 280) -> dict[str, Any]:
    """Run the rewritten suite in one pytest subprocess, each test in each verdict mode ``select``
    names it for (:mod:`tests.reference.plugin`; ``None``: every test in every mode). Returns
    ``{"collected": [...], "outcomes": {mode: {test: "passed" | "failed" | "skipped"}}, "log": ...}``."""
    work = tests.parent
    plan = work / "plan.json"
    results = work / "results.json"
    plan.write_text(
        json.dumps({"modes": list(sdist.modes), "select": select or {}, "all": select is None, "results": str(results)})
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ASSAY_REFERENCE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["ASSAY_REFERENCE_PLAN"] = str(plan)
    (work / "pytest.ini").write_text("[pytest]\n")  # this directory is the rootdir, no project settings
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
         "-p", "no:langsmith_plugin", "-p", "no:phoenix", "-p", "no:benchmark", "-p", "no:hypothesispytest",
         "-p", "tests.reference.plugin", tests.name],
        cwd=work, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    log = proc.stdout[-6000:] + proc.stderr[-3000:]
    assert results.exists(), log
    out: dict[str, Any] = json.loads(results.read_text())
    out["log"] = log
    return out


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


def selection(suite: str, manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Which tests run in which mode: those that pass on the reference in it, and the excluded ones
    that pass on assay all the same (``beyond``)."""
    entry = manifest[suite]
    return {
        mode: sorted({*entry["passes"][mode], *(k for k, v in entry.get("beyond", {}).items() if mode in v["modes"])})
        for mode in SDISTS[suite].modes
    }


# ---- the manifest from the reference's own runs, and the README's list of exclusions ----------------


def _outcomes(path: Path) -> dict[str, str]:
    """``file.py::test`` → ``passed`` or the first line of the failure / error / skip message, from
    a junit file of the suite run against the real package from a directory named ``tests``."""
    names: list[str] = []
    outcomes: list[str] = []
    for tc in ET.parse(path).iter("testcase"):
        classname = tc.get("classname") or ""
        module = classname.removeprefix("tests.")
        if module == classname or "." in module:  # a sub-directory of the repository's tests: not in the sdist
            continue
        names.append(f"{module}.py::{tc.get('name', '')}")
        problems = [c for c in tc if c.tag in ("failure", "error", "skipped")]
        if problems:
            message = (problems[0].get("message") or problems[0].text or "").strip().splitlines() or [""]
            outcomes.append(f"{problems[0].tag}: {message[0][:160]}")
        else:
            outcomes.append("passed")
    return dict(zip(position_keys(names), outcomes, strict=True))


def classify(args: argparse.Namespace) -> None:
    """``passes`` and ``excluded`` of openevals and agentevals from the reference's junit files
    ``{suite}-ref-{mode}.xml``, one per verdict mode of the suite (``beyond`` and potato's entry
    are kept)."""
    manifest = load_manifest()
    for suite in ("openevals", "agentevals"):
        modes = SDISTS[suite].modes
        runs = {m: _outcomes(Path(args.results) / f"{suite}-ref-{m}.xml") for m in modes}
        entry = manifest.setdefault(suite, {})
        entry["files"] = sorted({k.partition("::")[0] for r in runs.values() for k in r})
        entry["passes"] = {m: sorted(k for k, v in r.items() if v == "passed") for m, r in runs.items()}
        entry["excluded"] = excluded_of(runs)
        entry["beyond"] = {k: v for k, v in entry.get("beyond", {}).items() if k in entry["excluded"]}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def excluded_of(runs: dict[str, dict[str, str]]) -> dict[str, str]:
    """The tests that passed on the reference in no mode, with what they did there (one outcome
    when every mode saw the same, else ``mode: outcome`` joined by `` / ``)."""
    excluded = {}
    for name in sorted({k for r in runs.values() for k in r}):
        seen = {m: r.get(name, "absent") for m, r in runs.items()}
        if "passed" not in seen.values():
            same = len(set(seen.values())) == 1
            excluded[name] = next(iter(seen.values())) if same else " / ".join(f"{m}: {o}" for m, o in seen.items())
    return excluded


#: Why a test is excluded, from what it did on the reference in its verdict modes.
REASONS = (
    ("LangSmithConnectionError", "LangSmith: hub prompts or `evaluate()` on a LangSmith dataset (network)"),
    ("openaipublic.blob.core.windows.net", "network: the reference downloads tiktoken's encoding at run time"),
    ("Google model tests are temporarily disabled", "skipped upstream (Google model tests disabled)"),
    (
        "Event loop is closed",
        "fails on the reference in every mode: `RuntimeError: Event loop is closed` (a LangChain model's async client "
        "reused across event loops)",
    ),
    ("stand-in reasoning", "verdict-dependent: asserts the model's free-text label (a language name)"),
    (
        "skips itself",
        "passes on potato (agentevals not installed); skips itself where agentevals' graph trajectory evaluators are "
        "available, as on assay, which implements them",
    ),
)


def reason(outcome: str) -> str:
    for needle, why in REASONS:
        if needle.lower() in outcome.lower():
            return why
    return f"fails on the reference: {outcome}"


def exclusions_markdown(manifest: dict[str, Any]) -> str:
    """The README's list of excluded tests, grouped by reason (generated; checked by a test)."""
    groups: dict[str, list[str]] = {}
    beyond: dict[str, str] = {}
    for suite in SDISTS:
        for test, outcome in manifest[suite]["excluded"].items():
            groups.setdefault(reason(outcome), []).append(f"{suite}: {test}")
        for test, info in manifest[suite].get("beyond", {}).items():
            beyond[f"{suite}: {test}"] = f" — passes on assay, runs (`{'`, `'.join(info['modes'])}`)"
    lines = []
    for why, ids in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        lines.append(f"- **{why}** ({len(ids)}):")
        lines.extend(f"  - `{i.partition(': ')[0]}` `{i.partition(': ')[2]}`{beyond.get(i, '')}" for i in sorted(ids))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch")
    c = sub.add_parser("classify")
    c.add_argument("results")
    sub.add_parser("exclusions")
    args = parser.parse_args(argv)
    if args.command == "exclusions":
        print(exclusions_markdown(load_manifest()), end="")
    elif args.command == "fetch":
        for sdist in SDISTS.values():
            print(fetch(sdist))
    else:
        classify(args)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
