"""Tables to text: compare's tables as plain text (wrapped to WIDTH) or Markdown, and the lines around them (what
was read, what more there is). display_rows is the one place a row's values become display text (harness.report's
HTML reuses it). The verdict as text is harness.console.verdict_text; CSV and JSON are harness.console.csv_json."""

from __future__ import annotations

import re
import textwrap

from tabulate import tabulate

from harness.analysis.cells import SHOWN_AS_TEXT, Cell, Mfu, Table, fmt_int, fmt_mib, fmt_ms, fmt_pct
from harness.analysis.dataset import Dataset
from harness.console.textsafe import CELL, TEXT, WORD, bounded, markdown_cell, one_line
from harness.console.textsafe import markdown as md

WIDTH = 120  # what compare's plain-text output fits in: the verdict, and every table (cells wrap)


def display_rows(table: Table) -> list[list]:
    """Each row's values as display text: numbers formatted, a text (a name, a reason) at most CELL characters, none
    of its words over WORD (harness.console.textsafe.bounded); the rows' values themselves are unchanged (JSON, CSV)."""
    keys = [k for k, _h in table.columns]
    fmt = {"ms": fmt_ms, "ref_ms": fmt_ms, "first": fmt_ms,
           "tokens_s": fmt_int, "ref_tokens_s": fmt_int, "memory": fmt_mib, "ref_mem": fmt_mib, "mem": fmt_mib,
           "mfu": fmt_pct, "impact": lambda x: f"{x:+,.0f}"}
    out = []
    for row in table.rows:
        line = []
        for k in keys:
            v = row.get(k)
            if isinstance(v, (Cell, Mfu, *SHOWN_AS_TEXT)):
                v = v.text()
                v = v if v is None else bounded(v, CELL, WORD)
            elif k in fmt and isinstance(v, (int, float)):
                v = fmt[k](v)
            elif isinstance(v, str):  # a name from a record: on its row (a newline would start a forged line)
                v = one_line(bounded(v, CELL, WORD))
            line.append("" if v is None else v)
        out.append(line)
    return out


def fit_widths(headers: list[str], rows: list[list], width: int = WIDTH, gap: int = 2,
               floor: int = 10) -> tuple[list, list] | None:
    """(cell widths, header widths) that fit a plain-text table in `width` characters once its cells are wrapped at
    them: the widest columns are narrowed to one common cap (down to `floor`), none below its longest word.
    None when the table fits as it is; [] when it cannot fit (too many columns: render_text lists it row by row).
    tabulate pads a header by 2 (its MIN_PADDING) in the simple format."""
    def longest_word(text, most):
        return min(max((len(w) for w in _kept_whole(str(text)).split()), default=0), most)

    natural = [max([len(str(h)) + 2] + [max((len(x) for x in str(r[i]).splitlines()), default=0) for r in rows])
               for i, h in enumerate(headers)]
    # a column is not narrowed below its header's longest word, nor below its cells' (rung names, GPU labels) up to 20
    least = [max(longest_word(h, 99) + 2, *(longest_word(r[i], 20) for r in rows)) for i, h in enumerate(headers)]
    budget = width - gap * (len(natural) - 1)
    if sum(natural) <= budget:
        return None

    def widths(cap):
        return [max(min(n, cap), m) for n, m in zip(natural, least)]

    cap = max(natural)
    while cap > floor and sum(widths(cap)) > budget:
        cap -= 1
    if sum(widths(cap)) > budget:
        return []
    cells = [None if w >= n else w for w, n in zip(widths(cap), natural)]
    return cells, [None if w is None else w - 2 for w in cells]


_INSIDE_A_NAME = re.compile(r"(?<=_)(?=\S)|(?<=\+)(?=[A-Za-z])")  # after a '_', or a '+' before a letter
_INTERVAL = re.compile(r"\[[^\[\]\s]*(?: [^\[\]\s]+){1,2}\]")  # a delta's interval: '[+7.2%, +8.2%]', '[range 1x, 2x]'
_KEPT_SPACE = "\x01"


def _kept_whole(text: str) -> str:
    """text with the spaces inside each interval made a mark no wrap breaks at: an interval is read whole."""
    return _INTERVAL.sub(lambda m: m.group().replace(" ", _KEPT_SPACE), text)


class _Wrapper(textwrap.TextWrapper):
    """Wraps at spaces and at the marks _fill puts inside a name too long for the column (dropped as it splits)."""
    wordsep_simple_re = re.compile(r"(\s+)|\x00")


def _fill(cell, width: int | None):
    """A cell's text wrapped at width (its own line breaks kept), at spaces; a name longer than the width is broken
    after a '_' or a '+' ('inductor_comprehensive_' / 'padding', 'best-of-ladder+' / 'fused-adamw-clip'), not inside
    a word of it, and only a piece still too long is cut. As it is where the column needs no wrapping."""
    if width is None or not isinstance(cell, str) or len(cell) <= width:
        return cell
    wrapper = _Wrapper(width, break_on_hyphens=False)

    def marked(line: str) -> str:
        return " ".join(_INSIDE_A_NAME.sub("\x00", w) if len(w) > width else w for w in _kept_whole(line).split(" "))
    return "\n".join("\n".join(wrapper.wrap(marked(line)) or [""]) for line in cell.splitlines()).replace(_KEPT_SPACE, " ")


def _row_lines(headers: list[str], row: list) -> list[str]:
    """One row of a table too wide for WIDTH, as "- column: value; column: value" wrapped (empty cells left out)."""
    items = [f"{h}: {' '.join(str(c).split())}" for h, c in zip(headers, row) if str(c).strip()]
    return _wrap("- " + "; ".join(items), "")


def render_text(tables: list[Table], header: list[str], footer: list[str], markdown: bool = False) -> str:
    """Plain text or Markdown. In Markdown every piece of text is escaped (harness.console.textsafe: a record's strings
    carry no HTML, links or images into a page); the caller makes the whole text safe for a terminal."""
    def esc(text) -> str:  # a title, a note, a line: bounded (harness.console.textsafe.bounded), then escaped for Markdown
        text = bounded(text, TEXT, WORD)
        return md(text) if markdown else text

    parts = [("\n".join(map(esc, header)) + "\n") if header else ""]
    for t in tables:
        if markdown:
            parts.append(f"### {esc(t.title)}\n")
        else:
            parts += _wrap(f"== {esc(t.title)}", "")
        if t.rows:
            rows = display_rows(t)
            if markdown:
                rows = [[markdown_cell(c) for c in r] for r in rows]
            headers = [(md if markdown else str)(bounded(h, CELL, WORD)) for _k, h in t.columns]
            fit = None if markdown else fit_widths(headers, rows)
            if fit == []:  # too many columns for WIDTH: each row as one wrapped "column: value; ..." item
                parts += [line for r in rows for line in _row_lines(headers, r)]
            else:
                if fit:  # wrapped here, not by tabulate's maxcolwidths: 0.10 parses '30,071' as an int there and fails
                    rows = [[_fill(c, w) for c, w in zip(r, fit[0])] for r in rows]
                    headers = [_fill(h, w) for h, w in zip(headers, fit[1])]
                parts.append(tabulate(rows, headers=headers, tablefmt="github" if markdown else "simple",
                                      disable_numparse=True))
        for n in t.notes:
            parts += [f"- {esc(n)}"] if markdown else _wrap(f"note: {esc(n)}")
        parts.append("")
    for f in footer:
        parts += [f"- {esc(f)}"] if markdown else _wrap(esc(f), "")
    return "\n".join(parts).rstrip() + "\n"


def _wrap(text: str, indent: str = "  ") -> list[str]:
    """text as lines of at most WIDTH characters, the first indented by indent, the rest two spaces more."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent + "  ", initial_indent=indent if indent else "",
                         break_on_hyphens=False) or [""]


def header_lines(ds: Dataset, paths, legend: bool = True) -> list[str]:
    """What was read (counts), the envs oldest torch first, and (legend) each device's short name and full label."""
    ok = sum(len(g.records) for g in ds.groups)
    lines = _wrap(f"{ds.valid_records} valid record(s) under {', '.join(map(str, paths))}: {ok} ok measured run(s) in "
                  f"{len(ds.groups)} comparable group(s), {len(ds.references)} reference(s), "
                  + (f"{len(ds.peers)} peer record(s), " if ds.peers else "") + f"{len(ds.failed)} not ok"
                  + (f", {len(ds.contended)} contended left out" if ds.contended else "")
                  + (f", {ds.filtered} filtered out" if ds.filtered else "") + ".", "")
    if ds.env_order:
        lines += _wrap("envs (oldest torch first): " + ", ".join(f"{bounded(e, WORD)} ({bounded(ds.env_versions.get(e) or '?', WORD)})"
                                                             for e in ds.envs()), "")
    if ds.gpu_order and legend:
        lines += _wrap("devices: " + "; ".join(f"{bounded(ds.name(g), WORD)} = {bounded(g, WORD)}" for g in ds.gpus()), "")
    return lines


def more_lines(tables) -> list[str]:
    return _wrap("More: every table with --detail, or one with --table NAME (" + ", ".join(tables) + "); "
                 "--format markdown|csv|json", "")
