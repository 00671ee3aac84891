"""What every chart of the report shares: the type settings (set as this module is imported, before any figure),
the sizes (a page's width and a phone's), the colours that tell series apart, every text bounded and made safe to
draw, and the figure saved as PNG bytes. The charts themselves are drawn in harness.report.charts,
harness.report.delta_charts, harness.report.versions_chart and harness.report.answer_charts.
"""

from __future__ import annotations

import io
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.text
import matplotlib.ticker

from harness.console.textsafe import CHART_TITLE, CHART_WORD, CROWDED, LABEL, bounded, chart_text

DPI = 110
# zlib level 3, not Pillow's 6: the same pixels, 4% more bytes, 40% less time compressing (0.74 -> 0.46 s for the
# committed results' 17 wide charts)
PNG_OPTIONS = {"format": "png", "dpi": DPI, "pil_kwargs": {"compress_level": 3}}
Chart = tuple[str, bytes, str]  # file name, PNG, caption


# lines of one text in a chart (a title wrapped; a label: a 2x2 chart's device and env, two lines each), past which
# the rest run on in the last (a name of many lines is not drawn over its neighbours)
CHART_LINES, LABEL_LINES = 8, 4


def _label(text) -> str:
    """A tick label, legend entry or annotation as drawn: each line at most LABEL characters, no word over
    CHART_WORD; a line that had to be shortened is also wrapped at half that (what a phone's chart has room for)."""
    return _lines(text, LABEL, CHART_WORD, wrap=LABEL // 2, most=LABEL_LINES)


def _lines(text, width: int, word: int, wrap: int | None = None, most: int = CHART_LINES) -> str:
    """text in at most `most` lines, each at most `width` characters with no word over `word`
    (harness.console.textsafe.bounded; with `wrap`, a line shortened is wrapped at that), then made safe to draw
    (harness.console.textsafe.chart_text)."""
    lines = str(text).split("\n")
    if len(lines) > most:
        lines[most - 1:] = [" ".join(lines[most - 1:])]
    shown = [bounded(line, width, word) for line in lines]
    if wrap:
        shown = [textwrap.fill(new, wrap) if new != line else new for new, line in zip(shown, lines, strict=True)]
    return chart_text("\n".join(shown))


PER_INCH = 10  # characters of 10-point text an inch of a chart holds (about 13: some room spare)


def _crowded(text) -> str:
    """A name where a few characters' room is all there is (under one of four bars): at most CROWDED characters, in
    lines of half that."""
    return textwrap.fill(bounded(text, CROWDED), CROWDED // 2) if len(str(text)) > CROWDED // 2 else str(text)


def _title(text, width: int) -> str:
    """A title that names what the records hold, wrapped at `width` characters: at most CHART_TITLE characters before
    it is wrapped, no word over CHART_WORD (a long name is shortened, not broken over lines)."""
    return textwrap.fill(bounded(text, CHART_TITLE, CHART_WORD), width)


def _drawable(fig) -> None:
    """Every title, label, legend entry and tick label drawn as written (harness.console.textsafe.chart_text): no control
    characters, no mathtext from a record. Tick labels are drawn from their formatter, so it is changed too. And
    bounded (harness.console.textsafe.bounded), whatever a record holds: tick labels, legend entries and annotations (names,
    mostly) at LABEL characters a line, titles and axis labels at CHART_TITLE, no word over CHART_WORD. Once per
    figure, before anything measures its text (_tight_layout, _png)."""
    if getattr(fig, "_harness_drawable", False):
        return
    fig._harness_drawable = True
    labels = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, matplotlib.ticker.FixedFormatter):
                formatter.seq = [_label(t) for t in formatter.seq]
            elif isinstance(formatter, matplotlib.ticker.FuncFormatter):  # what set_xticks(x, labels) makes
                formatter.func = lambda v, pos, func=formatter.func: _label(func(v, pos))
            labels.update(axis.get_ticklabels())
        labels.update(ax.texts)
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            labels.update(legend.get_texts())
    for text in fig.findobj(matplotlib.text.Text):
        if text in labels:
            text.set_text(_label(text.get_text()))
        else:
            text.set_text(_lines(text.get_text(), CHART_TITLE, CHART_WORD))


def _tight_layout(fig) -> None:
    """fig.tight_layout() on the text as it will be drawn (_drawable): a record's name as written could be too wide
    to lay out."""
    _drawable(fig)
    fig.tight_layout()


def _png(fig, before_save=None) -> bytes:
    # the text as drawn (_drawable); before_save(fig) runs after that, for layout that measures text (measuring the
    # raw text can fail)
    _drawable(fig)
    if before_save is not None:
        before_save(fig)
    # The tight bounding box, measured at the PNG's dpi without a draw: bbox_inches="tight" first draws the whole
    # figure (rendering disabled) to find it. The same PNGs, about a tenth less drawing time. A figure with a layout
    # engine must be laid out by that draw first, so it keeps "tight" (none of ours has one: tight_layout() is once).
    tight = "tight"
    if fig.get_layout_engine() is None:
        fig.set_dpi(DPI)
        tight = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
    buf = io.BytesIO()
    fig.savefig(buf, bbox_inches=tight, **PNG_OPTIONS)
    plt.close(fig)
    return buf.getvalue()


# the axis says "thousands of tokens/s"; up to two decimals, so a CPU's ticks at 1,200 and 1,400 tokens/s do not both
# read "1" (trailing zeros dropped: 150,000 reads "150")
THOUSANDS = matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v / 1000:,.2f}".rstrip("0").rstrip("."))
WIDE, NARROW = 8.0, 4.2  # inches: a page's column, and a phone's (the HTML shows the narrow one below 600 px)
PHONE_FONTS = {"font.size": 12, "axes.titlesize": 12, "legend.fontsize": 11, "xtick.labelsize": 11, "ytick.labelsize": 11}


def fonts(width: float):
    """Larger type for a narrow chart: a phone shows it at about 90% of its drawn size."""
    return plt.rc_context(PHONE_FONTS if width < WIDE else {})


# Type for a chart drawn about 8 inches wide: still legible when a phone shrinks it. Text unhinted: FreeType's hinting
# (matplotlib's default) fits each glyph to the pixel grid, which at this dpi reads no better (a heavier "=", uneven
# spacing) and costs a sixth of the drawing (the 13 chart jobs of a report of 100,000 records: 6.6 -> 5.6 s here)
plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "legend.fontsize": 10, "xtick.labelsize": 10,
                     "ytick.labelsize": 10, "text.hinting": "no_hinting"})


MAX_SERIES = 20  # bars or lines one chart tells apart: tab20's colours; more are drawn in parts of this many


def series_colors(n: int) -> list:
    """n colours a reader tells apart (n <= MAX_SERIES): tab10's (matplotlib's default cycle) up to 10, tab20's past."""
    return list(plt.get_cmap("tab10" if n <= 10 else "tab20").colors)[:n]
