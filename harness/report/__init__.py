"""The technical report, generated from records: `python -m harness.report results/ -o report/` (no torch).

  outline.py   what the report says, in which order: sections, findings per topic, which tables and charts
  document.py  the document model (headings, paragraphs, findings, tables, images) and its Markdown and HTML
  charts.py    the matplotlib charts of what was measured (ladder, sweeps, memory, kernel mix), drawn from typed results
  delta_charts.py  the charts of deltas with their intervals (cross-version, cross-GPU, the 2x2 factor splits)
  figures.py   what every chart shares: type settings, sizes, colours, text made drawable, the PNG
  drawing.py   the charts drawn in worker processes (one per CPU) while the outline writes the text
  __main__.py  the command line

The findings are harness.analysis.findings; the tables are harness.compare's (and harness.analysis.fastest's, through it).
"""
