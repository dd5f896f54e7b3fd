"""A stand-in ``assay`` executable for the operator's exit-code mapping: writes a summary where
the run file's sink (``--set sink.path=DIR``) says, prints a line, and exits with ``--exit N``."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    code = int(argv[argv.index("--exit") + 1])
    sink = next(a.split("=", 1)[1] for a in argv if a.startswith("sink.path="))
    out = Path(sink)
    out.mkdir(parents=True, exist_ok=True)
    status = {0: "ok", 3: "gate_failed", 4: "dead_letters", 5: "budget", 130: "interrupted"}.get(code, "failed")
    summary = {"run_id": f"fake-{code}", "status": status, "counts": {"read": 7}, "messages": [f"reason-{code}"]}
    (out / "_SUMMARY.json").write_text(json.dumps(summary))
    print(f"fake assay {' '.join(argv)}: exiting {code}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
