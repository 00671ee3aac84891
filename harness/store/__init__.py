"""The record index: a store kept beside a folder's records (FOLDER/.harness-index/), so a warm compare parses and
validates nothing. It sits beside the record model, not in it: harness/record/ owns the format, its validation and the
typed view; this package only keeps what reading each file gave, and is reached through harness.analysis.dataset's
`read=`/`files=` seam (RecordIndex.read, RecordIndex.files). No torch import.

  index.py     RecordIndex: a folder's index opened, brought up to date, and read from (its docstring says how)
  file.py      one folder's index files, the base and its deltas: read (mapped, keyed hash) and written (whole)
  scan.py      a record file's identity and outcome, a folder's listing, the bound on its index's size
  codec.py     a record's sections as the index keeps them: encoded, compressed, shared, or left unread
  identity.py  which code made an index (a change rebuilds it), and this user's key for its keyed hash
  layout.py    where an index is and what its file holds: names, magic, columns, bounds
"""
