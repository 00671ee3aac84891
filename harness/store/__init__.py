"""The record index: a store kept beside a folder's records (FOLDER/.harness-index/), so a warm compare parses and
validates nothing. It sits beside the record model, not in it: harness/record/ owns the format, its validation and the
typed view; this package only keeps what reading each file gave, and is reached through harness.analysis.dataset's
`read=`/`files=` seam (RecordIndex.read, RecordIndex.files). index.py says how. No torch import.
"""
