"""What text from a record, a plan or an option becomes where it leaves the harness: the one place each kind of
output is made harmless. Records travel between people and clusters, so every string in one is untrusted.

  terminal(s)     control characters (ESC, BEL, CR, ...), bidi overrides and lone surrogates shown as \\x1b-style
                  escapes
  one_line(s)     terminal(), and newlines shown as \\n: a file name in a one-line message
  markdown(s)     also one line (a newline as a space), no raw HTML, no links or images: '<' as &lt;, '](' and
                  '][' broken, no link reference definition ('[' at a line's start escaped), no GFM autolink
                  ('www\\.', 'https\\://', an email address as code); markdown_cell: also '|'
  csv_cell(v)     a text cell a spreadsheet would run as a formula (= + - @ tab CR first) gets a leading '
  csv_comment(s)  a '# title' line above a CSV table: one line, no piece between commas a formula or a quote
  chart_text(s)   terminal(s) with '$' escaped (matplotlib's mathtext)
  bounded(s, width, word)  at most width characters, no word longer than word: a longer one keeps its head and
                  tail around a marker that counts what was left out ('NVIDIA H100 80GB XXXX…(+19,950)…XXXX HBM3'), so
                  a name of a megabyte grows no chart, table or line, and two names that differ at their end still
                  read different. On text as displayed (before the escapes above), never on a key (grouping,
                  matching) nor on data (JSON, CSV). The widths: LABEL, CHART_WORD, CROWDED, CHART_TITLE (charts),
                  WORD, CELL, TEXT (text, Markdown, HTML, warnings)
  file_part(s)    a piece of a file name: letters, digits, '.', '_', '-' only, never '.' or '..'
  script_value(v, what)   a value for a generated script (sbatch, Dockerfile): refused with a newline or a
                  control character (ScriptValueError), else shell-quoted where it needs it
  script_command(v, what) a command as words (a cluster config's nox): each word quoted; refused with a shell
                  operator, a control character or an unbalanced quote

The renderers (harness.console.render, verdict_text and csv_json, harness.report, harness.compare, harness.cluster)
call these on everything they output; nothing else in the harness has to care. No imports beyond the standard library.
"""

from __future__ import annotations

import re
import shlex

# C0 and C1 control characters (but newline and tab), DEL, and the Unicode bidi/zero-width controls that make
# text read differently from what it is ("Trojan Source"), and lone surrogates (JSON can hold "\\ud800"; no encoder
# writes one, so a print or a chart would fail on it)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_SCRIPT_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # in a script, tab and newline too
_FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")
_FILE_BAD = re.compile(r"[^A-Za-z0-9._-]+")
# Markdown that turns live without '<' or '](': a link reference definition ('[x]: https://...' at the start of a
# line, also inside a list item or a quote), and GFM's autolinks (www., a URL scheme, an email address)
_LINE_START_BRACKET = re.compile(r"(?m)^([ \t>*+-]*(?:\d{1,9}[.)][ \t>*+-]*)*)\[")
_AUTOLINK_SCHEME = re.compile(r"(?i)\b(https?|ftp|mailto|xmpp)(?=:)|\b(www)(?=\.)")
_EMAIL = re.compile(r"[A-Za-z0-9._+-]+@[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+")


# How wide a text from a record is shown (harness.console.textsafe.bounded), in characters. Above what the committed records'
# outputs hold (their longest word in a table: a 107-character URL in an out-of-memory message; their longest cell: a
# 593-character one; their longest paragraph: 1,571 characters), so only an unusual record's text is shortened.
LABEL = 90  # a chart's tick label, legend entry or annotation (each of its lines)
CHART_WORD = 60  # one word in a chart's text (a name: a label of a device, an env and a rung keeps all three)
CROWDED = 32  # a name where a chart has a few characters' room (a 2x2 chart's bar: its device, its env)
CHART_TITLE = 240  # a chart's title, before it is wrapped to the chart's width (4 lines of a wide chart)
WORD = 120  # one word (a name, a path, a URL: no space in it) in text, Markdown and HTML
CELL = 1_000  # a table cell or header
TEXT = 8_000  # a line, a paragraph, a list item, a note, a warning (the 50 run ids a report section cites, each WORD)
_MARK = "…(+{:,})…"  # what stands for the characters left out, with their count
_LEAST = 24  # shortening a text's longest words to fit its width stops at this (the whole text is shortened then)
_MARKED = re.compile(r"…\(\+([\d,]+)\)…")
# between words: spaces, and '/' and '@' (a path's folders and file name, an env label with its torch version
# 'env@2.6.0'), so each part is shortened on its own and a file's name stays whole in a long path
_SPACE = re.compile(r"(\s+|[/@])")


class ScriptValueError(ValueError):
    """A value that cannot go into a generated script as one word on one line."""


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text) -> str:
    """Text safe to print: every control character but newline and tab shown as an escape, never sent."""
    return _CONTROL.sub(_escape, str(text))


def one_line(text) -> str:
    """terminal(), and line breaks shown as \\n (\\r is already an escape): text that must stay on its line, such as a
    file name in a warning (a name with a newline would print a second, forged 'warning:' line)."""
    return terminal(text).replace("\n", "\\n").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def markdown(text) -> str:
    """Text safe inside Markdown: terminal(), and no raw HTML ('<' as &lt;), no inline or reference links and
    no images ('](' and '][' broken with a backslash), no link reference definition, no autolink, so a record cannot
    add a script, a javascript: link, a link or an external image (a tracking beacon) to a report."""
    text = terminal(text).replace("<", "&lt;").replace("\n", " ")  # on its line: a title stays one title
    text = text.replace("](", "]\\(").replace("][", "]\\[")
    text = _LINE_START_BRACKET.sub(lambda m: m.group(1) + "\\[", text)
    # 'www\\.' and 'https\\:' read the same and link nothing; an email is linked even through escapes and
    # entities (cmark-gfm finds it in the text as rendered), so it is shown as code, which is never linked
    text = _AUTOLINK_SCHEME.sub(lambda m: (m.group(1) or m.group(2)) + "\\", text)
    return _EMAIL.sub(lambda m: f"`{m.group()}`", text)


def markdown_cell(text) -> str:
    """markdown() for a table cell: also no '|' (a new column) and no line break (a new row)."""
    return markdown(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def csv_cell(value):
    """A CSV value: text a spreadsheet would evaluate (=HYPERLINK(...), +cmd, -1+..., @SUM) gets a leading
    apostrophe (OWASP's advice); numbers (also as printed: '+0.00%'), and "-" for no
    value, stay as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_FIRST) and value != "-" and not _is_number(value):
        return "'" + value
    return value


def csv_comment(text) -> str:
    """A '# ...' line above a CSV table, on one line: a spreadsheet still splits it at each comma, so no piece
    becomes a formula (a piece that starts like one gets a leading ', as csv_cell) or opens a quoted cell ('"' as
    "'")."""
    pieces = " ".join(str(text).splitlines()).replace('"', "'").split(",")
    return ",".join(piece[:len(piece) - len(piece.lstrip())] + csv_cell(piece.lstrip()) for piece in pieces)


def _is_number(text: str) -> bool:
    """'-0.12', '+0.00%', '-1,234': a number as the tables print it, which a spreadsheet reads as a number."""
    try:
        float(text.removesuffix("%").replace(",", ""))
    except ValueError:
        return False
    return text.strip() == text


def chart_text(text) -> str:
    """A chart label, title or legend entry: terminal(), and '$' escaped so matplotlib draws it instead of
    parsing it as mathtext (an unbalanced or hostile formula would otherwise fail the whole chart)."""
    return terminal(text).replace("$", r"\$")


def bounded(text, width: int, word: int | None = None) -> str:
    """text in at most `width` characters, none of its words longer than `word` (default: width); words are what
    spaces, '/' and '@' separate (a path's file name, an env label's torch version is a word of its own).
    A word too long keeps its head and tail around a marker that says how many characters were left out:
    'env-aaaa…(+196)…aaa-one'. Where the words so shortened are still too many for the width, the longest are shortened
    further (down to _LEAST characters), so a sentence keeps its words and a label its parts ('h100 / env…(+9)…one /
    B=16'); past that the whole text keeps its head and tail. Text as it is when it fits: the display of ordinary names
    does not change. Use it on the text as displayed, before escaping it (a cut never splits an escape), never on a
    key that groups or matches."""
    text = str(text)
    word = width if word is None else min(word, width)
    if len(text) <= word:
        return text
    parts = _SPACE.split(text)  # words at even indices, what is between them at odd ones
    spaces = sum(len(p) for p in parts[1::2])
    words = parts[::2]

    def total(cap: int) -> int:
        return spaces + sum(min(len(w), cap) for w in words)

    if total(word) > width:  # shorten the longest words further, to the largest cap that fits
        low, high = _LEAST, word
        if total(low) > width:
            return _cut(text, width)
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if total(mid) <= width else (low, mid - 1)
        word = low
    return "".join(_cut(p, word) if i % 2 == 0 else p for i, p in enumerate(parts))


def _cut(text: str, width: int) -> str:
    """text (longer than width) as its head, the marker and its tail, width characters in all. Text shortened before
    (a name, then the line it is in) keeps one marker, that counts all that was left out."""
    if len(text) <= width:
        return text
    marks = list(_MARKED.finditer(text))
    if marks:
        start, end = marks[0].start(), marks[-1].end()
        hidden = (end - start) + sum(int(m.group(1).replace(",", "")) - len(m.group()) for m in marks)
    else:
        start = end = (len(text) + 1) // 2
        hidden = 0
    head, tail = text[:start], text[end:]
    shown = len(head) + len(tail)
    keep = min(shown, width - len(_MARK.format(hidden + shown)))  # the longest marker it could need
    while keep < shown and keep + 1 + len(_MARK.format(hidden + shown - keep - 1)) <= width:
        keep += 1
    if keep < 2:
        return text[:width]
    left = min(len(head), (keep + 1) // 2)
    right = min(len(tail), keep - left)
    left = keep - right
    return head[:left] + _MARK.format(hidden + shown - keep) + tail[len(tail) - right:]


def file_part(text, fallback: str = "x") -> str:
    """A piece of a file name made from record data: runs of anything but letters, digits, '.', '_' and '-'
    become one '_', no leading '.', so it never names a folder, a hidden file or a path outside."""
    part = _FILE_BAD.sub("_", str(text)).lstrip(".")
    return part[:100] or fallback


def is_file_part(name: str) -> bool:
    """True for a name file_part() would keep as it is (a plain file name, not hidden, not '..')."""
    return bool(name) and not _FILE_BAD.search(name) and not name.startswith(".")


def script_value(value, what: str) -> str:
    """`value` as one shell word for a generated script; ScriptValueError naming `what` if it holds a newline or
    another control character (it would start a line of its own: `--partition $'p1\\ntouch /tmp/x'`)."""
    text = str(value)
    bad = _SCRIPT_BAD.search(text)
    if bad:
        raise ScriptValueError(f"{what} {terminal(text)!r}: a control character ({_escape(bad)}) cannot go into a "
                               "generated script")
    return shlex.quote(text)


def script_command(value, what: str) -> str:
    """A command given as words (a cluster config's `nox: python3 -m nox`) for a generated script: each word
    shell-quoted, so it runs that one command; ScriptValueError if it holds a control character, a shell operator
    (; & | < > ( ): a second command, a redirection) or an unbalanced quote."""
    text = str(value)
    script_value(text, what)  # no newline or control character
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
        words = shlex.split(text)
    except ValueError as exc:
        raise ScriptValueError(f"{what} {terminal(text)!r}: {exc}") from None
    operators = [tok for tok in tokens if tok and set(tok) <= set("();<>|&")]
    if operators or not words:
        raise ScriptValueError(f"{what} {terminal(text)!r}: one command and its arguments"
                               + (f", no shell operator ({operators[0]})" if operators else ""))
    return shlex.join(words)


def script_line(value, what: str) -> str:
    """A line given as shell (a cluster config's setup lines): kept as written, but refused if it is more than
    one line."""
    text = str(value)
    bad = _SCRIPT_BAD.search(text.replace("\t", " "))
    if bad:
        raise ScriptValueError(f"{what} {terminal(text)!r}: a control character ({_escape(bad)}) cannot go into a "
                               "generated script")
    return text
