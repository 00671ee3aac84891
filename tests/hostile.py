"""Hostile copies of the committed CPU records (issue 22): env, rung, plan, CPU model and notes hold terminal
escapes, HTML, a javascript: link and an external image; they still pass schema validation. Also what the hostile-input
tests of several modules share: the `hostile` fixture (a test module imports hostile_records, its function),
the control characters no output may hold, a disk that fills up, wrong-typed fields, live Markdown, a lone surrogate."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from shipped import RESULTS

ROOT = Path(__file__).resolve().parent.parent
CPU_RECORDS = RESULTS / "cpu-amd-epyc-2core"
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


@pytest.fixture(scope="module", name="hostile")
def hostile_records(tmp_path_factory) -> Path:
    """Four hostile records, written once per test module: `def test_x(hostile)` after `from hostile import
    hostile_records`."""
    return write_hostile(tmp_path_factory.mktemp("hostile"), limit=4)


CONTROL = ("\x1b", "\x07")  # ESC and BEL: what no output made from a hostile record may hold


def disk_full(monkeypatch, module, after: int = 0):
    """os.fsync in `module` raises ENOSPC from its (after+1)-th call on: a disk that fills up."""
    import errno

    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(module.os, "fsync", fsync)


WRONG_TYPES = ("x", [], -1, {})  # a value of another JSON type than the field's


def field_paths(record, prefix=()):
    """Every field of `record` (objects walked whole, a list by its first item): where a wrong type can go."""
    yield prefix
    if isinstance(record, dict):
        for key, value in record.items():
            yield from field_paths(value, (*prefix, key))
    elif isinstance(record, list) and record:
        yield from field_paths(record[0], (*prefix, 0))


def with_value(record, path, value):
    """A deep copy of `record` with the field at `path` set to `value`."""
    copy = json.loads(json.dumps(record))
    *parents, last = path
    node = copy
    for key in parents:
        node = node[key]
    node[last] = value
    return copy


# Markdown that turns live without '<' or '](' (issue 31): a link reference definition at a line's start (also in a
# list item or a quote), whose image then shows wherever ![x] appears, and GFM's autolinks
LIVE_MARKDOWN = ("\n\n[x]: https://evil.example/beacon.png\n- [y]: http://evil.example/y\n> 1. [z]: ftp://evil.example/z"
                 "\n\n![x] ![y] ![z] www.evil.example https://evil.example/p mailto:me@evil.example u.v@evil.example\n")
SURROGATE = "\ud800"  # a lone surrogate: valid in JSON ("\ud800"), written by no encoder


def gfm_html(markdown: str) -> str:
    """`markdown` as GitHub renders it (cmark-gfm with its extensions, autolinks included)."""
    import cmarkgfm
    from cmarkgfm.cmark import Options

    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
