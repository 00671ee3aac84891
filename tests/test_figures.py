"""harness.report.figures: chart text from a record is drawn as written (no control character, no mathtext), and a
chart of many series is drawn in parts whose colours tell them apart. Issues 22 (a docstring's leading number is its
item) and 31 (its classes)."""

from __future__ import annotations

import json

from hostile import CONTROL, CPU_RECORDS, PAYLOAD

from harness.report import __main__ as report_main


def test_chart_labels_are_drawn_as_written():
    """4. Chart text from a record: no control characters, no mathtext (an unbalanced $ fails a chart)."""
    import matplotlib.pyplot as plt

    from harness.report import figures

    fig, ax = plt.subplots()
    ax.bar([0, 1], [1, 2], label="a" + PAYLOAD)
    ax.set_xticks([0, 1], ["$\\frac{", "y\x1b"])
    ax.set_title("t\x07")
    ax.legend()
    assert figures._png(fig).startswith(b"\x89PNG")
    texts = [t.get_text() for t in fig.findobj(plt.Text)] + [ax.xaxis.get_major_formatter()(0, 0)]
    assert not any(c in t for t in texts for c in CONTROL)


def test_many_series_are_drawn_so_they_can_be_told_apart(tmp_path, capsys):
    """Class 14 of issue 31: 25 envs (300 made a chart of 300 bars in 10 repeating colours): the ladder is drawn in
    parts of at most 20 series, each in colours of its own, and the caption says so."""
    from harness.report import figures

    records = tmp_path / "records"
    records.mkdir()
    for path in sorted(CPU_RECORDS.glob("*-fp32-r*.json"))[:2]:
        for i in range(25):
            r = json.loads(path.read_text())
            r["env"] = r["environment"]["env_name"] = f"env{i:02}"
            r["run_id"] += f"-{i}"
            (records / f"{r['run_id']}.json").write_text(json.dumps(r))
    assert report_main.main([str(records), "-o", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    text = (tmp_path / "r" / "report.md").read_text()
    assert "(series 1-20 of 25)" in text and "(series 21-25 of 25)" in text
    assert len({tuple(c) for c in figures.series_colors(figures.MAX_SERIES)}) == figures.MAX_SERIES

