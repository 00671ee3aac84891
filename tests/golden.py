"""The README's no-torch commands on the committed records, and their outputs as of before the restructuring (issue 15).

    python tests/golden.py --update     # rewrite tests/data/golden/ (only when an output is meant to change)

tests/test_golden.py runs every command again and compares with the stored output, so moving code around cannot
change what a user sees. Only what differs between two identical runs or two clones is normalised: the temp folder, the clone's path and the report's date.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from shipped import SHIPPED_ROOT

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden"
# Every command runs in the copy of the shipped records (tests/shipped.py), as it would at a checkout's root: what a
# user ran into results/ changes no output. Scripts are named from the checkout.
SCRIPTS = ROOT / "scripts"

COMMITTED = ["results/cpu-amd-epyc-2core", "results/reference", "results/gpu-h100-80gb-hbm3", "results/gpu-h200"]
GPUS = ["results/gpu-h100-80gb-hbm3", "results/gpu-h200", "results/reference"]
CPU = ["results/cpu-amd-epyc-2core"]

# name -> argv after the interpreter; "{tmp}" is a fresh folder per command
COMMANDS: dict[str, list[str]] = {
    "compare-all-text": ["-m", "harness.compare", *COMMITTED],
    "compare-all-detail": ["-m", "harness.compare", *COMMITTED, "--detail"],
    "compare-all-markdown": ["-m", "harness.compare", *COMMITTED, "--format", "markdown"],
    "compare-all-csv": ["-m", "harness.compare", *COMMITTED, "--format", "csv"],
    "compare-all-json": ["-m", "harness.compare", *COMMITTED, "--format", "json"],
    "compare-gpus-all": ["-m", "harness.compare", *GPUS, "--all", "--baseline-gpu", "H200"],
    "compare-cpu-filtered": ["-m", "harness.compare", *CPU, "--table", "ladder", "--table", "versions",
                             "--rung", "bf16", "--rung", "fp32", "--baseline-env", "latest"],
    "compare-fastest": ["-m", "harness.compare", *GPUS, "--table", "fastest", "--format", "markdown"],
    "compare-no-records": ["-m", "harness.compare", "{tmp}"],
    "report-all": ["-m", "harness.report", *COMMITTED, "-o", "{tmp}/report"],
    "readme-gpu-check": [str(SCRIPTS / "readme_gpu.py"), "--check"],
    "check-explain-records": [str(SCRIPTS / "check_explain_records.py"), "results/gpu-h100-80gb-hbm3", "results/gpu-h200"],
}
# Goldens only for the outputs users read (compare's text, Markdown, CSV and JSON, the report, the two checks on the
# committed GPU records); help texts, env specs and Dockerfiles are held by structural tests (test_cli_help: every
# option says what it does; test_envs: show and pins print the spec as read; test_dockerfiles: each file is its
# rendering), which a rewording does not break.


def run(name: str) -> str:
    """The command's exit code, stdout and stderr (and the report's markdown), as one text."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [a.replace("{tmp}", tmp) for a in COMMANDS[name]]
        env = {**os.environ, "COLUMNS": "120", "PYTHONHASHSEED": "0", "PYTHON_COLORS": "0", "NO_COLOR": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        p = subprocess.run([sys.executable, *argv], check=False, cwd=SHIPPED_ROOT, capture_output=True, text=True,
                           env=env, timeout=900)
        out = f"exit {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}"
        report = Path(tmp) / "report"
        if report.is_dir():
            out += "--- files\n" + "".join(f"{f.name}\n" for f in sorted(report.iterdir()))
            out += "--- report.md\n" + (report / "report.md").read_text()
        out = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated {when}", out)
        return out.replace(tmp, "{tmp}").replace(str(SHIPPED_ROOT), "{root}").replace(str(ROOT), "{root}")


def main() -> int:
    if sys.argv[1:] != ["--update"]:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        (GOLDEN / f"{name}.txt").write_text(run(name))
        print(f"wrote {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
