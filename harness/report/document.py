"""The report as a document: a list of blocks (headings, paragraphs, lists, findings, tables, images), and its
two renderings, Markdown (charts as PNG files beside it) and one self-contained HTML page (charts embedded)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tabulate import tabulate

from harness.analysis.cells import Table
from harness.analysis.findings import Finding
from harness.analysis.tables.registry import TABLES
from harness.console.output import write_files
from harness.console.render import display_rows
from harness.console.textsafe import CELL, TEXT, WORD, bounded, markdown_cell, terminal
from harness.console.textsafe import markdown as _markdown


@dataclass
class Doc:
    """Blocks: ("h", level, text) ("p", text) ("ul", [items]) ("findings", [Finding]) ("table", Table)
    ("img", file, caption)."""

    blocks: list = field(default_factory=list)
    images: dict = field(default_factory=dict)  # file name -> PNG bytes
    every_row: Callable[[str], str] | None = None  # table name -> the command that lists that compare table whole

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def ul(self, items: list[str]):
        if items:
            self.blocks.append(("ul", list(items)))

    def findings(self, items: list[Finding], numbered: bool = False):
        if items:
            self.blocks.append(("findings", list(items), numbered))

    def cite(self, records):
        """The run ids a section rests on, folded (the first CITED_IDS of them, and how many more)."""
        ids = list(dict.fromkeys(records))
        if ids:
            self.blocks.append(("cite", len(ids), ", ".join(ids[:CITED_IDS])
                                + (f" and {len(ids) - CITED_IDS:,} more" if len(ids) > CITED_IDS else "")))

    def fold(self, summary: str):
        """What follows, until unfold(), is folded behind `summary` (<details>, in both renderings)."""
        self.blocks.append(("fold", summary))

    def unfold(self):
        self.blocks.append(("unfold",))

    def table(self, t: Table, folded: bool | None = None):
        """A table; folded (None: when it has more than FOLD_ROWS rows) behind a one-line summary; past SHOWN_ROWS
        rows or SHOWN_NOTES notes, those first and a line that says how many more and which command lists them."""
        self.blocks.append(("table", self._shown(t), len(t.rows) > FOLD_ROWS if folded is None else folded))

    def _shown(self, t: Table) -> Table:
        rows_over, notes_over = len(t.rows) - SHOWN_ROWS, len(t.notes) - SHOWN_NOTES
        if rows_over <= 0 and notes_over <= 0:
            return t
        where = f": `{self.every_row(t.name)}` lists every one" if self.every_row and t.name in TABLES else ""
        notes = t.notes[:SHOWN_NOTES] + ([f"... and {notes_over:,} more notes{where}"] if notes_over > 0 else [])
        if rows_over > 0:
            notes.insert(0, f"The first {SHOWN_ROWS} of its {len(t.rows):,} rows{where}.")
        return replace(t, rows=t.rows[:SHOWN_ROWS], notes=notes)

    def answer(self, blocks: list[tuple[str, list[str]]]):
        """The verdict: (head, details) items as a nested list."""
        self.blocks.append(("answer", blocks))

    def img(self, name: str, png: bytes, caption: str, narrow: bytes | None = None):
        """A chart; `narrow`, a version drawn for a phone's width, is what the HTML shows below 600 px (report.md,
        read on a wide screen, links the PNG)."""
        self.images[name] = png
        self.blocks.append(("img", name, caption, narrow))

    @property
    def title(self) -> str:
        return next((b[2] for b in self.blocks if b[0] == "h"), "report")


FOLD_ROWS = 12  # a table longer than this is folded (<details>) so the page reads top to bottom
# A year of results makes tables of thousands of rows (every reference, every run left out): past these, a table
# shows its first rows and notes and says which command lists them all; a section cites its first CITED_IDS runs.
SHOWN_ROWS, SHOWN_NOTES, CITED_IDS = 100, 30, 50


def _headers(t: Table) -> list[str]:
    return [bounded(h, CELL, WORD) for _k, h in t.columns]


def markdown(text) -> str:
    """A heading, paragraph, list item, note or caption in Markdown: at most TEXT characters, no word over WORD
    (harness.console.textsafe.bounded: what a record holds is shown bounded), then escaped (harness.console.textsafe.markdown)."""
    return _markdown(bounded(text, TEXT, WORD))


def to_markdown(doc: Doc) -> str:
    """Every piece of text escaped (harness.console.textsafe.markdown): what a record holds adds no HTML, link or image."""
    out = []
    for b in doc.blocks:
        if b[0] == "h":
            out.append("#" * b[1] + " " + markdown(b[2]))
        elif b[0] == "p":
            out.append(markdown(b[1]))
        elif b[0] == "ul":
            out.append("\n".join(f"- {markdown(i)}" for i in b[1]))
        elif b[0] == "findings":
            out.append("\n".join(f"{f'{i}.' if b[2] else '-'} {markdown(f.text)}"
                                 + (f" <sub>{markdown(f.cited())}</sub>" if f.records else "") for i, f in enumerate(b[1], 1)))
        elif b[0] == "cite":
            out.append(f"<details><summary>The {b[1]} records it rests on</summary>\n\n{markdown(b[2])}\n\n</details>")
        elif b[0] == "fold":
            out.append(f"<details><summary>{markdown(b[1])}</summary>")
        elif b[0] == "unfold":
            out.append("</details>")
        elif b[0] == "answer":
            out.append("\n".join(f"- {markdown(head)}" + "".join(f"\n  - {markdown(d)}" for d in details)
                                 for head, details in b[1]))
        elif b[0] == "table":
            t, folded = b[1], b[2]
            text = f"**{markdown(t.title)}**\n\n" if t.title else ""
            if t.rows:
                rows = [[markdown_cell(c) for c in r] for r in display_rows(t)]
                body = tabulate(rows, headers=[markdown_cell(h) for h in _headers(t)], tablefmt="github",
                                disable_numparse=True)
                text += (f"<details><summary>{len(t.rows)} rows</summary>\n\n{body}\n\n</details>" if folded else body)
            text += "".join(f"\n\n_{markdown(n)}_" for n in t.notes)
            out.append(text)
        elif b[0] == "img":
            alt = markdown(b[2]).replace("[", "\\[").replace("]", "\\]")
            out.append(f"![{alt}]({b[1]})\n\n_{markdown(b[2])}_")
    return "\n\n".join(out) + "\n"


CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #bbb;margin-top:2em}
h1,h2,h3,p,li,summary,figcaption,.caption{overflow-wrap:break-word}
.scroll{max-width:100%;overflow-x:auto;margin:.5em 0 1em}
table{border-collapse:collapse;font-size:.85em}
code{background:#f3f3f3;padding:0 .25em;border-radius:3px;font-size:.9em}
details>summary{cursor:pointer;color:#333}.answer li{margin:.25em 0}.answer>li{font-weight:600}
.answer li li{font-weight:400}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}th{background:#f0f0f0}
tr:nth-child(even) td{background:#fafafa}figure{margin:1em 0}figcaption,.note{color:#555;font-size:.9em}
img{max-width:100%;border:1px solid #ddd}.caption{font-weight:600;margin-top:1em}
.cite{color:#777;font-size:.8em;word-break:break-all}.cite>summary{display:inline;white-space:nowrap}
li>.cite{display:inline}
.appendix{margin:2em 0}.appendix>summary{font-size:1.3em;font-weight:600;border-bottom:1px solid #bbb;padding:.3em 0}
@media (max-width:600px){body{margin:1em auto;padding:0 .6em;font-size:15px}h1{font-size:1.4em}h2{font-size:1.15em}
figure.wide{overflow-x:auto;margin:1em 0}figure.wide img{max-width:none;width:560px}table{font-size:.75em}}"""


CODE_SPAN = re.compile(r"`([^`<>]+)`")  # Markdown's `code`, as the report's own sentences write it


def _text(text) -> str:
    """Text for the page: at most TEXT characters, no word over WORD (harness.console.textsafe.bounded), HTML-escaped, and its
    control characters shown as escapes (harness.console.textsafe.terminal)."""
    return html.escape(terminal(bounded(text, TEXT, WORD)), quote=True)


def _inline(text: str) -> str:
    """Escaped text (_text) with Markdown's `code` spans shown as code (the report's own sentences use them)."""
    return CODE_SPAN.sub(r"<code>\1</code>", _text(text))


def to_html(doc: Doc) -> str:
    head = (f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_text(doc.title)}</title>"
            f"<style>{CSS}</style></head><body>")
    out = [head]
    for b in doc.blocks:
        if b[0] == "h":
            out.append(f"<h{b[1]}>{_text(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            out.append(f"<p>{_inline(b[1])}</p>")
        elif b[0] == "ul":
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "answer":
            out.append("<ul class='answer'>" + "".join(
                f"<li>{_inline(head)}" + ("<ul>" + "".join(f"<li>{_inline(d)}</li>" for d in details) + "</ul>"
                                          if details else "") + "</li>" for head, details in b[1]) + "</ul>")
        elif b[0] == "findings":
            tag = "ol" if b[2] else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(f.text)}" + (
                f" <details class='cite'><summary>records</summary>{_text(f.cited())}</details>" if f.records else "")
                + "</li>" for f in b[1]) + f"</{tag}>")
        elif b[0] == "cite":
            out.append(f"<details class='cite'><summary>The {b[1]} records it rests on</summary>{_text(b[2])}</details>")
        elif b[0] == "fold":
            out.append(f"<details class='appendix'><summary>{_text(b[1])}</summary>")
        elif b[0] == "unfold":
            out.append("</details>")
        elif b[0] == "table":
            t, folded = b[1], b[2]
            if t.title:
                out.append(f"<div class='caption'>{_text(t.title)}</div>")
            if t.rows:
                rows = [[terminal(c) if isinstance(c, str) else c for c in r] for r in display_rows(t)]
                cells = tabulate(rows, headers=_headers(t), tablefmt="html", disable_numparse=True)
                body = "<div class='scroll'>" + CODE_SPAN.sub(r"<code>\1</code>", cells) + "</div>"
                out.append(f"<details><summary>{len(t.rows)} rows</summary>{body}</details>" if folded else body)
            out += [f"<p class='note'>{_inline(n)}</p>" for n in t.notes]
        elif b[0] == "img":
            data = base64.b64encode(doc.images[b[1]]).decode()
            img = f"<img alt='{_text(b[2])}' src='data:image/png;base64,{data}'>"
            if b[3] is not None:  # a phone gets the chart drawn for its width; without one, the wide chart scrolls
                small = base64.b64encode(b[3]).decode()
                img = f"<picture><source media='(max-width:600px)' srcset='data:image/png;base64,{small}'>{img}</picture>"
            out.append(f"<figure class='{'fits' if b[3] is not None else 'wide'}'>{img}"
                       f"<figcaption>{_text(b[2])}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write(doc: Doc, out_dir: Path) -> list[Path]:
    """DIR/report.md, DIR/report.html and the PNGs, each whole or not at all and only inside DIR
    (harness.console.output.write_files: OutputError, one line, if DIR is not writable or fills up); the paths written."""
    files = {"report.md": to_markdown(doc).encode(), "report.html": to_html(doc).encode(), **doc.images}
    return write_files(out_dir, files)
