"""What every part of RecordView (harness.record.view) stands on: the record it wraps, its top-level fields as
stored and its sections as their types, each value made once per record, and the guards a field is read through.

The view's parts (view_environment, view_numbers, view_memory, view_evidence) each derive one concern's values from
these; RecordView joins them. No torch import here.
"""

from __future__ import annotations

from types import MappingProxyType

from harness.record.sections import Contention, Environment, Explain, Flags, Peer, Reference, Steps, Summary, Workload


def as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


# The schema types these fields, so a record read through harness.record.io has them right; a view of a dict that
# was not (a test's, a script's) still never hands a list where a caller sorts, hashes or multiplies.
def as_int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_text(value) -> str | None:
    return value if isinstance(value, str) else None


_UNREAD = object()  # what ViewBase._once has not read yet (None is a value it may read)


class Once:
    """A RecordView value made once per record (functools.cached_property's way) and kept in the view's __dict__
    under its name: read again, it is found there by the attribute lookup itself, at C speed, as no property or method
    call is (a report reads a few such values per run per table: millions of reads at 100,000 records). section: the
    value depends on that section alone (where the record index shares one between records, made once for all)."""

    def __init__(self, make, section: str | None = None):
        self.make, self.section, self.__doc__ = make, section, make.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, view, owner=None):  # only where the view's __dict__ has no value of that name yet
        if view is None:
            return self
        return view._once(self.name, self.make, view, section=self.section)


def once(make=None, *, section: str | None = None):
    """@once, or @once(section=...): a method made a view's value, computed on first read (Once)."""
    return Once(make, section) if make is not None else lambda make: Once(make, section)


def typed(key: str, cls) -> Once:
    """A record section as its type (harness.record.sections), made once."""
    return Once(lambda view: cls.of(view._r.get(key)), section=key)


class ViewBase:
    """The record a view reads (the dict itself is not copied; nothing here changes it), and what it has made of it."""

    # The view's parts add no slots: one layout for all of them, and no instance attributes but these two
    __slots__ = ("__dict__", "_r")

    def __init__(self, record: dict):
        self._r = record
        # The __dict__ holds what was read or derived once (a kernel profile has hundreds of rows), by name (Once). A
        # record from the index brings its INDEXED values, made for it alone: every view of it shares them (each value
        # is the record's, not the view's).
        known = getattr(record, "known", None)
        if known is not None:
            self.__dict__ = known

    def _once(self, name: str, make, *args, section: str | None = None):
        """make(*args), read once per view; where it comes from one section that the record index shares between
        records (harness.store.codec.SharedSection), once for all those records (100,000 records, a few environments)."""
        kept = self.__dict__
        value = kept.get(name, _UNREAD)
        if value is _UNREAD:
            shared = getattr(self._r.get(section), "typed", None) if section else None
            if shared is None:
                value = make(*args)
            else:
                value = shared.get(name, _UNREAD)
                if value is _UNREAD:
                    value = shared[name] = make(*args)
            kept[name] = value
        return value

    def get(self, key: str, default=None):
        """A top-level field as stored (for fields without an accessor of their own)."""
        return self._r.get(key, default)

    @property
    def raw(self) -> MappingProxyType:
        """The record, read-only."""
        return MappingProxyType(self._r)

    # Identity and outcome, as stored
    run_id = property(lambda self: self._r.get("run_id"))
    kind = property(lambda self: self._r.get("kind"))
    status = property(lambda self: self._r.get("status"))
    reason = property(lambda self: self._r.get("reason"))
    env = property(lambda self: self._r.get("env"))
    plan = property(lambda self: self._r.get("plan"))
    rung = property(lambda self: self._r.get("rung"))
    rung_index = property(lambda self: self._r.get("rung_index"))
    repeat = property(lambda self: self._r.get("repeat"))
    started_at = property(lambda self: self._r.get("started_at"))
    ok = property(lambda self: self._r.get("status") == "ok")

    # The sections as their types (harness.record.sections and .parts; read by attribute)
    reference = typed("reference", Reference)  # a transcribed log line (false if none)
    peer = typed("peer", Peer)  # a peer program's numbers: name, program, source, line
    # typed, read-only; .to_dict(): as stored. Made once: tables ask a cell's first run for it per row
    workload = once(lambda self: Workload(self._r.get("workload")))
    flags_section = typed("flags", Flags)  # requested, applied, after, changes, hash
    steps = typed("steps", Steps)
    environment = typed("environment", Environment)
    summary = typed("summary", Summary)
    explain = typed("explain", Explain)
    contention = typed("contention", Contention)
