"""harness.console.textsafe, each kind of output made harmless where text from a record leaves the harness: no
terminal escape, lone surrogate or newline from a record reaches a terminal raw or forges a line (compare in every
format, report); Markdown made from a record carries no HTML, link or image, even as GitHub renders it; no CSV cell
or '# title' line is a formula; a plan's name makes chart file names that stay inside -o. Issues 22 (a docstring's
leading number is its item) and 31 (its classes)."""

from __future__ import annotations

import csv
import io
import json
import re

from hostile import (
    CONTROL,
    CPU_RECORDS,
    FORMULA,
    hostile_records,  # noqa: F401 (the fixture `hostile`)
    write_hostile,
)
from module_cli import run_module

from harness import compare
from harness.report import __main__ as report_main


def test_terminal_escapes_never_reach_the_terminal(hostile, capsys, tmp_path):
    """1. compare (every format) and report print no ESC or BEL from a record, not even in a path."""
    for fmt in ("text", "markdown", "csv", "json"):
        assert compare.main([str(hostile), "--format", fmt]) == 0
        out, err = capsys.readouterr()
        assert "torch212" in out
        assert not any(c in out + err for c in CONTROL), fmt
    named = tmp_path / "named"
    named.mkdir()
    (named / "bad\x1b]0;pwned\x07.json").write_text("{}")  # a file name is record data too
    compare.main([str(hostile), str(named)])
    out, err = capsys.readouterr()
    assert "skipped" in err and not any(c in out + err for c in CONTROL)


def test_report_markdown_carries_no_html_links_or_images(hostile, tmp_path, capsys):
    """2. report.md (and compare --format markdown) has no raw HTML, no javascript: link, no external image."""
    assert report_main.main([str(hostile), "-o", str(tmp_path / "r")]) == 0
    out, _err = capsys.readouterr()
    assert not any(c in out for c in CONTROL)
    compare.main([str(hostile), "--format", "markdown"])
    for text in ((tmp_path / "r" / "report.md").read_text(), capsys.readouterr().out):
        assert "AMD EPYC" in text
        for bad in ("<script", "<img", "](javascript:", "](http://evil", "\x1b"):
            assert bad not in text
        assert "&lt;script>" in text  # shown, as text


def test_csv_cells_are_no_formulas(tmp_path, capsys):
    """3. A rung named like a spreadsheet formula reaches the CSV with a leading apostrophe."""
    def edit(r):
        r["rung"] = FORMULA
    records = write_hostile(tmp_path, edit=edit, limit=2)
    assert compare.main([str(records), "--format", "csv"]) == 0
    rows = [row for row in csv.reader(io.StringIO(capsys.readouterr().out)) if row and not row[0].startswith("#")]
    cells = [c for row in rows for c in row]
    assert "'" + FORMULA in cells
    assert not any(c.startswith(("=", "+", "@")) for c in cells)


def test_chart_file_names_stay_inside_out(tmp_path, capsys):
    """4. A plan named to climb out of -o: the report is written, every file inside -o, nothing above it."""
    def edit(r):
        r["plan"] = "x/../../../escaped-by-plan"
    records = write_hostile(tmp_path / "records", edit=edit, limit=4)
    out = tmp_path / "a" / "b" / "out"
    (out / "ladder-x").mkdir(parents=True)
    assert report_main.main([str(records), "-o", str(out)]) == 0
    capsys.readouterr()
    written = {p.name for p in out.iterdir()}
    assert "report.md" in written and any(n.startswith("ladder-x_") for n in written)
    assert not list(tmp_path.rglob("escaped-by-plan*"))


def test_markdown_from_a_record_links_nothing_as_github_renders_it(tmp_path, capsys):
    """Class 1 of issue 31: record text with a link reference definition, bare URLs, www. and email addresses in
    env, rung, plan, CPU model and notes: report.md and compare --format markdown, rendered as GitHub renders them,
    have no link or image that a record made (no href or src naming the record's host)."""
    from hostile import LIVE_MARKDOWN, gfm_html

    def edit(r):
        for key in ("env", "rung", "plan"):
            r[key] += LIVE_MARKDOWN
        r["environment"]["env_name"] = r["env"]
        r["environment"]["cpu"]["model"] += LIVE_MARKDOWN
        r["notes"] = [LIVE_MARKDOWN]
    records = write_hostile(tmp_path / "records", edit=edit, limit=4)
    assert report_main.main([str(records), "-o", str(tmp_path / "r")]) == 0
    texts = [(tmp_path / "r" / "report.md").read_text()]
    for args in ([], ["--detail"], ["--table", "ladder"]):
        assert compare.main([str(records), "--format", "markdown", *args]) == 0
        texts.append(capsys.readouterr().out)
    for text in texts:
        html = gfm_html(text)
        assert "evil.example" in html  # shown, as text
        assert not re.search(r"(href|src)=\"[^\"]*evil", html), re.findall(r"<(?:a|img) [^>]*evil[^>]*>", html)[:3]


def test_csv_title_lines_hold_no_formula(tmp_path, capsys):
    """Class 2 of issue 31: a name with a comma, a quote and a formula splits no '# title' line into a formula cell."""
    def edit(r):
        r["env"] = r["environment"]["env_name"] = "x,=cmd|' /C calc'!A0"
        r["plan"] = 'p," =1+2",+sum'
    records = write_hostile(tmp_path, edit=edit, limit=4)
    assert compare.main([str(records), "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert any(row and row[0].startswith("# ") for row in rows)
    cells = [c.strip() for row in rows for c in row]
    assert "'=cmd|' /C calc'!A0" in " ".join(cells)
    assert not any(c.startswith(("=", "+", "@")) for c in cells), [c for c in cells if c.startswith(("=", "+", "@"))]


def test_a_lone_surrogate_is_shown_as_an_escape(tmp_path):
    """Class 4 of issue 31: a lone surrogate in a record's text: compare (every format) and report print it as
    \\ud800, exit 0, no traceback."""
    from hostile import SURROGATE

    def edit(r):
        r["env"] = r["environment"]["env_name"] = r["env"] + SURROGATE
        r["rung"] += SURROGATE
        r["environment"]["cpu"]["model"] += SURROGATE
    records = write_hostile(tmp_path / "records", edit=edit, limit=4)
    for fmt in ("text", "markdown", "csv", "json"):
        p = run_module("harness.compare", records, "--format", fmt, "--detail", timeout=120)
        assert p.returncode == 0 and "\\ud800" in p.stdout and not p.stderr, (fmt, p.stderr[-300:])
    p = run_module("harness.report", records, "-o", tmp_path / "r", timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-300:]
    assert "\\ud800" in (tmp_path / "r" / "report.md").read_text() and "\\ud800" in (tmp_path / "r" / "report.html").read_text()


def test_a_newline_in_a_file_name_or_a_record_forges_no_line(tmp_path, capsys):
    """Class 12 of issue 31: a record file named 'bad<newline>warning: forged line.json', and env, rung and plan names
    with a newline: compare (text, markdown; --detail and the left-out table) starts no line with the forged text;
    each name stays on its line (or its table cell), its newline shown as \\n."""
    def edit(r):
        for key in ("env", "rung", "plan"):
            r[key] += f"\nwarning: forged {key}"
        r["environment"]["env_name"] = r["env"]
    records = tmp_path / "records"
    records.mkdir()
    for path in sorted(CPU_RECORDS.glob("*.json"))[:4]:
        r = json.loads(path.read_text())
        edit(r)
        (records / path.name).write_text(json.dumps(r))
    (records / "bad\nwarning: forged file.json").write_text("{}")
    for args in ([], ["--detail"], ["--table", "left-out"], ["--format", "markdown", "--detail"]):
        assert compare.main([str(records), *args]) == 0
        out, err = capsys.readouterr()
        assert not re.search(r"(?m)^[ |`-]*warning: forged", out + err), args
        assert "bad\\nwarning: forged file.json" in err

