"""Run records: one JSON file per measurement (schema: harness/record.schema.json).

    model.py    the record's shape and its one constructor (new_record), the schema version, the hashes
    io.py       the one writer (atomic, never overwrites) and the one reader (defensive, migrated, validated)
    migrate.py  older records read as the current schema version
    view.py     RecordView: read-only accessors for the tables (timed steps, tokens, device, peak memory...)

No torch import anywhere in this package.
"""
