"""What a command does at its edges: what it prints and writes, the YAML it reads, the signals that stop it (no torch).

  render.py    compare's tables as plain text and Markdown, and the lines around them (the report reuses the rows' text)
  verdict_text.py  the verdict as text blocks and lines (the report lists the same blocks)
  csv_json.py  compare's tables and verdict as CSV and JSON
  textsafe.py  what text from a record, a plan or an option becomes where it leaves the harness: bounded, escaped
  output.py    writing a command's output where the disk or the stream may refuse it (a full disk, a closed pipe)
  signals.py   SIGTERM, SIGINT and SIGHUP as an exception, so a stopped command cleans up and says what finished
  yamlfile.py  reading a user's YAML (plans, cluster configs, env specs) with bounds
"""
