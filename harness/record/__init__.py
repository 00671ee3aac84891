"""Run records: one JSON file per measurement (schema: harness/record/schema.json).

    model.py     the record's shape and its one constructor (new_record), the schema version, and the one rule for
                 each hash: workload_hash, flags_hash, measurement_key ("the same measurement")
    sections.py  each section as a type (Summary, Contention, Environment, Explain, Workload, ...), what RecordView
                 hands out; tests/test_record_schema.py holds the schema equal to them
    parts.py     each object nested in a section as a type (Gpu, Cpu, Kernels and its rows, MemorySplit, Mfu, ...),
                 and Part: how every section and object is read from its JSON (one place) and written back
    schema.json  the record's JSON Schema: each field's type, and the bounds of each number and string it lists
    bounds.py    the bounds on every number and string of a record (finite, in range for what it measures, sizes
                 bounded), checked before anything reads one (and before one is written)
    io.py        the one writer (atomic, never overwrites), the one reader (defensive, migrated, validated) and the
                 listing of a folder's record files
    validator.py whether a record is valid: the schema (jsonschema) and the shortcuts that decide most of it faster
    files.py     whole-file writes (fsynced, whole or not at all), for every writer of the harness
    migrate.py   older records read as the current schema version (1 -> 2: what v1 left to absence, said)
    view.py      RecordView: read-only accessors for the tables (timed steps, tokens, device, peak memory...), joined
                 from its parts: view_base.py (the record, its fields and sections, values made once),
                 view_environment.py (where it ran), view_numbers.py (steps, summary), view_memory.py (memory used
                 and usable), view_evidence.py (record.explain: kernels, MFU, libraries, memory split)
    device.py    what tells one device from another: DeviceIdentity and the device label every table groups by
    workload_code_history.json  the workload-code identity of records made before records carried one

No torch import anywhere in this package.
"""
