"""Hostile copies of the committed CPU records (issue 22): env, rung, plan, CPU model and notes hold terminal
escapes, HTML, a javascript: link and an external image; they still pass schema validation."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_RECORDS = ROOT / "results" / "cpu-amd-epyc-2core"
CLEAR, TITLE = "\u001b[2J", "\u001b]0;pwned\u0007"
SCRIPT, IMG = "<script>alert(1)</script>", '"><img src=x onerror=alert(1)>'
LINKS = "[c](javascript:alert(1))![i](http://evil.example/p.png)"
PAYLOAD = CLEAR + TITLE + SCRIPT + IMG + LINKS
FORMULA = '=HYPERLINK("http://evil.example","x")'


def write_hostile(out: Path, edit=None, limit: int | None = None) -> Path:
    """Copies of the CPU records with PAYLOAD in env, rung, plan, CPU model and notes (`edit(record)` changes
    each copy further); returns `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(CPU_RECORDS.glob("*.json"))[:limit]:
        r = json.loads(path.read_text())
        r["env"] = r["env"] + PAYLOAD
        r["environment"]["env_name"] = r["env"]
        r["rung"] = r["rung"] + PAYLOAD
        r["plan"] = r["plan"] + PAYLOAD
        r["environment"]["cpu"]["model"] = "AMD EPYC" + PAYLOAD
        r["notes"] = [PAYLOAD]
        if edit:
            edit(r)
        (out / path.name).write_text(json.dumps(r))
    return out
