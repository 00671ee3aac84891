"""The README's Quick start commands, one per line, as a new user copies them: the lines of the first fenced block
under the "## Quick start" heading. .ci/run runs them in order, so a README change that breaks them breaks CI.

    python .ci/quickstart.py [README.md]
"""

from __future__ import annotations

import sys
from pathlib import Path

HEADING = "## Quick start"


def commands(readme: str) -> list[str]:
    lines = readme.splitlines()
    try:
        start = lines.index(HEADING)
    except ValueError:
        raise SystemExit(f"quickstart: no '{HEADING}' heading in the README") from None
    fences = [i for i in range(start + 1, len(lines)) if lines[i].startswith("```")]
    if len(fences) < 2 or any(lines[i].startswith("## ") for i in range(start + 1, fences[1])):
        raise SystemExit(f"quickstart: no fenced block under '{HEADING}'")
    return [line.strip() for line in lines[fences[0] + 1:fences[1]] if line.strip()]


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "README.md")
    print("\n".join(commands(path.read_text(encoding="utf-8"))))
