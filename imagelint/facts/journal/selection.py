"""Decoding some fields only: which DATA objects of an entry hold the wanted fields, read no further.

Asked for some fields only (``entry(off, fields)``, ``fields_at``), the reader decodes no more than
those: it learns which DATA objects hold the wanted fields from each FIELD object's list of its DATA
objects (walked a little at a time, in proportion to the work it saves, and given up past
``_WALK_READS`` page reads: a list scattered over a large file costs a read per step), and until
that list is complete it reads just the name in front of the ``=`` of an item it does not know yet
(``_probe``). A DATA object that is neither wanted nor needed is then never read, so damage confined
to it goes unnoticed by such a read.

A DATA object probed for its field name only is not hashed: that costs the whole payload the
selection saves. The FIELD data lists are what tells a wanted object from an unwanted one in a file
closed cleanly: a walk decodes their objects unchecked (most are never used) and each is checked
when an entry first uses it; an object on the list of another field is checked at once, and if
damaged it is damage to every entry that probes it later (its name may be the damaged part).
What a selection remembers is capped in bytes and in count, as the decoded-object cache is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from imagelint.facts.journal.chains import MAX_CHAIN, HashChains
from imagelint.facts.journal.errors import CorruptJournal, HashMismatch
from imagelint.facts.journal.objects import (
    CACHE_BYTES,
    CACHE_LIMIT,
    CACHE_VALUE_LIMIT,
    DATA_N_ENTRIES,
    NAME_MAX,
    U64_AT,
    Value,
)
from imagelint.facts.journal.paged import PagedBuffer

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs milliseconds to import and is needed for annotations only
    from typing import Any

_PROBE_WHOLE = 4096  # compressed payloads up to this size are decoded whole when probed for their name
_WALK_FIRST = 64  # FIELD data-list steps a field selection may take before any item is probed
_WALK_CAP = 16_384  # ... and at most, per field selection and file: past it, probing goes on alone
_WALK_READS = 256
"""Positioned reads a field selection's walk may cause per file, then probing goes on alone. The
objects on a list lie wherever their first entry was written: a list of one object per process
(``_PID``) costs about a page read per step, which thrashes the page cache across a large file and
learns mostly objects no entry read ever uses, while probing an entry's own items reads next to the
entry (a new value is written just before the first entry using it)."""


class _Selection:
    """What one file has learnt about one set of wanted fields.

    ``known`` maps a DATA object's offset to its decoded (field, value) when the field is wanted
    (``True`` instead when the value is too large to keep), or to ``False`` when it is not; only
    objects shared by several entries are remembered as unwanted. ``walk`` lists the wanted fields
    whose FIELD data lists are still to be read (``cursor``: where the last one stopped); once all
    are read (``closed``), every DATA object of a wanted field is in ``known`` and an item that is
    not can be skipped unread.
    """

    __slots__ = (
        "closed",
        "cursor",
        "has_large",
        "known",
        "probes",
        "reads",
        "size",
        "unverified",
        "walk",
        "walked",
        "wanted",
        "wanted_raw",
    )

    def __init__(self, wanted: frozenset[str], walk: bool) -> None:
        self.wanted = wanted
        self.wanted_raw = frozenset(name.encode("utf-8", "surrogateescape") for name in wanted)
        self.known: dict[int, tuple[str, Value] | bool] = {}
        self.unverified: set[int] = set()  # offsets in ``known`` a walk decoded without their hash check
        self.closed = False
        self.has_large = False
        self.walk = sorted(wanted, reverse=True) if walk else []
        self.cursor: int | None = None
        self.probes = 0
        self.reads = 0  # positioned reads the walk caused
        self.walked = 0
        self.size = 0  # bytes of the values in ``known``

    def give_up_walking(self) -> None:
        self.walk = []
        self.closed = False


class FieldSelection(HashChains):
    """Some fields of an entry's items, decoded without reading the others."""

    def __init__(self, buf: PagedBuffer, name: str, file_size: int) -> None:
        super().__init__(buf, name, file_size)
        self._selections: dict[frozenset[str], _Selection] = {}
        h = self.header
        self._chain_limit = min(MAX_CHAIN, h.n_data if h.n_data is not None else h.n_objects)

    def _selection(self, fields: Collection[str]) -> _Selection:
        key = fields if type(fields) is frozenset else frozenset(fields)
        sel = self._selections.get(key)
        if sel is None:
            sel = self._selections[key] = _Selection(key, self._lists_complete)
            self._walk(sel, _WALK_FIRST)
        return sel

    def _walk(self, sel: _Selection, steps: int) -> None:
        """Read up to ``steps`` more DATA objects from the wanted fields' FIELD data lists."""
        if not sel.walk:  # all read (closed), or not to be trusted or read at all
            return
        buf = self._buf
        known = sel.known
        spent = self._spent  # what the walk decodes is not kept for an entry: not the entry's budget
        reads = buf.reads
        try:
            while sel.walk and steps > 0:
                name = sel.walk[-1]
                off = sel.cursor
                if off is None:
                    off = self._field_head(name)
                while off and steps > 0:
                    kv = self._cache.get(off)
                    if kv is None:  # checked against its hash when an entry uses it, if one ever does
                        kv = self._load_data(off, verify=False)
                        if off not in self._verified:
                            sel.unverified.add(off)
                    if kv[0] != name:
                        self._checked_payload(off)  # a damaged name, or a damaged list
                        raise CorruptJournal(f"the data list of field {name} holds another field", offset=off)
                    if len(kv[1]) <= CACHE_VALUE_LIMIT:
                        known[off] = kv
                        sel.size += len(kv[1])
                    else:
                        known[off] = True
                        sel.has_large = True
                    nxt = self._next_field(off)
                    steps -= 1
                    sel.walked += 1
                    # writers put each new DATA object at the head of its field's list: offsets fall
                    if nxt >= off or sel.walked > self._chain_limit:
                        raise CorruptJournal(f"the data list of field {name} loops", offset=off)
                    off = nxt
                if off:
                    sel.cursor = off
                else:
                    sel.walk.pop()
                    sel.cursor = None
            sel.reads += buf.reads - reads
            if not sel.walk:
                sel.closed = True
            elif (
                sel.walked >= _WALK_CAP
                or sel.reads >= _WALK_READS
                or len(known) >= CACHE_LIMIT
                or sel.size > CACHE_BYTES
            ):
                sel.give_up_walking()
        except CorruptJournal:  # a broken list or a damaged object on it: probe every item instead
            sel.give_up_walking()
        finally:
            self._spent = spent

    def _probe(self, off: int, sel: _Selection) -> tuple[str, Value] | bool:
        """Whether the DATA object at ``off`` holds a wanted field: its (field, value) if so, else False.

        Reads the field name only, unless the payload is compressed. Objects shared by several
        entries are remembered; meanwhile the FIELD data lists are walked as far as probing has cost.
        """
        sel.probes += 1
        if sel.walk and sel.walked < _WALK_FIRST + 2 * sel.probes:
            self._walk(sel, 32)
            got = sel.known.get(off)
            if got is not None:
                return self._cache[off] if got is True else got
            if sel.closed:
                return False
        damaged = self._damaged.get(off)
        if damaged is not None:  # met by a walk: its name is not to be trusted either
            raise HashMismatch(damaged, offset=off)
        flags, size, raw = self._data_head(off, self._data_payload + NAME_MAX + 1)
        hit = self._cache.get(off)
        if hit is not None:
            wanted = hit[0] in sel.wanted
        elif flags and size - self._data_payload <= _PROBE_WHOLE:
            hit = self._cache[off]  # small: decoded whole (and kept if shared), as a wanted one would be
            wanted = hit[0] in sel.wanted
        elif flags:
            # the name only: a large compressed value of an unwanted field is never decoded whole
            head = self._payload_head(off, flags, size)
            eq = head.find(b"=")
            if eq == 0 or (eq < 0 and len(head) <= NAME_MAX):
                raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
            wanted = eq > 0 and head[:eq] in sel.wanted_raw
        else:
            start = self._data_payload  # in ``raw``, which holds the first NAME_MAX + 1 bytes of payload
            eq = raw.find(b"=", start, min(size, start + NAME_MAX + 1))
            if eq == start or (eq < 0 and size <= start + NAME_MAX):
                raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
            # no "=" in the first NAME_MAX bytes: a name longer than any wanted one
            wanted = eq > 0 and raw[start:eq] in sel.wanted_raw
        kv: tuple[str, Value] | bool = self._cache[off] if wanted else False
        if U64_AT.unpack_from(raw, DATA_N_ENTRIES)[0] > 1:
            known = sel.known
            if len(known) >= CACHE_LIMIT or sel.size > CACHE_BYTES:
                known.clear()
                sel.unverified.clear()
                sel.size = 0
                sel.give_up_walking()
            if kv is False:
                known[off] = kv
            elif isinstance(kv, tuple) and len(kv[1]) <= CACHE_VALUE_LIMIT:
                known[off] = kv
                sel.size += len(kv[1])
        return kv

    def _select(self, items: Sequence[int], fields: Collection[str]) -> list[tuple[str, Value]]:
        """The (field, value) pairs of ``items`` whose field is in ``fields``, in item order."""
        sel = self._selection(fields)
        known = sel.known
        if sel.closed and not sel.has_large:  # no True in ``known``: False and None filtered out
            found: list[Any] = list(filter(None, map(known.get, items)))
            if sel.unverified and not sel.unverified.isdisjoint(items):
                self._check_used(sel, items)
            return found
        pairs: list[tuple[str, Value]] = []
        for item in items:
            kv = known.get(item)
            if kv is None:
                if sel.closed:
                    continue
                kv = self._probe(item, sel)
                if kv is False:
                    continue
            elif kv is False:
                continue
            pairs.append(self._cache[item] if kv is True else kv)
        if sel.unverified and not sel.unverified.isdisjoint(items):
            self._check_used(sel, items)
        return pairs

    def _check_used(self, sel: _Selection, items: Sequence[int]) -> None:
        """Check the objects a walk decoded unchecked that these items use (once each)."""
        for item in items:
            if item in sel.unverified:
                self._checked_payload(item)
                sel.unverified.discard(item)
