"""What an index is on disk: its place, its file layout and its bounds (harness.store.index says how they are
used)."""

from __future__ import annotations

INDEX_FORMAT = 2
INDEX_DIR = ".harness-index"
RACY_NS = 3 * 10**9  # a file changed this close to being indexed is also checked by content on every read
SHARED = ("environment", "flags", "workload")  # sections stored once per distinct value
LAZY = "explain"
MAGIC = b"HARNESS-INDEX-2\n"  # the file ends with two lengths (8 bytes each), MAGIC and the 32-byte keyed hash
EARLIER_MAGICS = (b"HARNESS-INDEX-1\n",)  # an earlier harness's layout: rebuilt quietly, as after a code change
TRAILER = 16 + len(MAGIC) + 32
PARALLEL_FROM = 256  # files to read before a process per CPU pays for itself
DELTA = ".delta-"  # a delta's name: the base's name, this, when it was written (ns) and a random part
# STALE_TEMP_S (harness.record.files): a temp file older than this in an index folder is a killed writer's, removed
# whenever the folder is opened (read, not only written: a warm compare writes nothing)
# How large an index file may be before it is read. Its keyed hash covers all but its explain sections, so a file of
# the index's magic and lengths, sparse or not, would be read whole to be refused (20 GiB: 33 s). An index holds, per
# record file, its path and a few numbers (a row: ROW_BYTES, a path of PATH_MAX and a reason of validator.MAX_REASON
# included) and its record re-encoded (the core: the record less its explain and shared sections, plus what its view
# derives, which names the steps' own lists instead of repeating them; the explain section compressed; the shared
# sections once per distinct value): at most GROWTH times the record's JSON even where the record writes its numbers
# shorter than the index does ("1e5" kept as 100000.0), where a real index holds a quarter of it (the benchmark's: 2.3
# MB for 322 records of 10 MB, ~7 KB a record; CPU records ~350 bytes). So a file larger than INDEX_FLOOR plus that
# much for each record file listed (at most io.MAX_RECORD_BYTES each: a larger one is not read) is no index of this
# folder: not read, one warning, rebuilt. A file up to INDEX_FLOOR is read without that bound (hashing it: ~0.2 s,
# HASH_CHUNK at a time); a larger one is held to it as soon as the folder's listing (taken while the index is read) is
# done: before its hash where it is done by then, else between two chunks of it, and in any case before its rows are
# used (an index of 100,000 benchmark records, ~700 MB, is hashed and parsed while the folder is listed, not after).
INDEX_FLOOR = 64 * 2**20
GROWTH = 8
ROW_BYTES = 8192
HASH_CHUNK = 8 * 2**20  # an index file is hashed this many bytes at a time, never read whole into memory to be hashed
MAX_DELTAS = 16  # deltas read before the next change writes a new base that takes them in
DELTA_SHARE = 0.1  # ... or the share of the rows that they hold
GONE = "gone"  # a delta's row for a file no longer there
COLUMNS = ("key", "size", "mtime_ns", "ctime_ns", "ino", "digest", "outcome", "why", "core", "explain")  # a row
# The body's columns: a row's core and explain sections are where they lie in the file
STORED = (*COLUMNS[:-2], "core_at", "core_length", "explain_at", "explain_length", "explain_digest")
