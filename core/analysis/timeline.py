"""A fact's presence over a conversation's answered turns, held as the turns where it changes.

A followed fact is in memory (``True``), out of it (``False``) or not stated yet on the turn's thread
(``None``) at each answered turn. Written out turn by turn that is a list per fact and config, which for
a long conversation that states something in every turn is the square of its length; here it is the
turns where the value changes::

    >>> t = Timeline.from_values([None, True, True, False, False, True])
    >>> t.changes
    [(1, True), (3, False), (5, True)]
    >>> t[4], list(t) == [None, True, True, False, False, True]
    (False, True)

It reads like the list it stands for (indexing, slicing, iterating, ``==`` with a list), so the facts
table, the findings and the tests read one as they read the other.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator, Sequence

Value = bool | None


class Timeline(Sequence):
    """``length`` values, ``None`` before the first change; each change ``(k, value)`` holds from
    answered turn ``k`` until the next (changes are in turn order, each to another value)."""

    __slots__ = ("_at", "_values", "_length")

    def __init__(self, changes: Iterable[tuple[int, Value]], length: int):
        self._at: list[int] = []
        self._values: list[Value] = []
        self._length = length
        for k, value in changes:
            if value != (self._values[-1] if self._values else None):
                self._at.append(k)
                self._values.append(value)

    @classmethod
    def from_values(cls, values: Sequence[Value]) -> "Timeline":
        return cls(enumerate(values), len(values))

    @property
    def changes(self) -> list[tuple[int, Value]]:
        return list(zip(self._at, self._values))

    def runs(self) -> Iterator[tuple[int, int, Value]]:
        """``(start, stop, value)`` for every stretch of one value, ``None`` ones included."""
        at, values, n = self._at, self._values, self._length
        if not at or at[0] > 0:
            yield 0, at[0] if at else n, None
        for i, (k, value) in enumerate(zip(at, values)):
            yield k, at[i + 1] if i + 1 < len(at) else n, value

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self._length))]
        if k < 0:
            k += self._length
        if not 0 <= k < self._length:
            raise IndexError(k)
        i = bisect_right(self._at, k) - 1
        return self._values[i] if i >= 0 else None

    def __iter__(self) -> Iterator[Value]:
        for start, stop, value in self.runs():
            for _ in range(start, stop):
                yield value

    def __eq__(self, other) -> bool:
        if isinstance(other, Timeline):
            return self._length == other._length and self.changes == other.changes
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self._length and list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Timeline({self.changes!r}, {self._length})"

    def true_in(self, lo: int, hi: int) -> bool:
        """Whether any turn from ``lo`` up to (not including) ``hi`` has the fact."""
        at, values = self._at, self._values
        hi = min(hi, self._length)
        if lo >= hi:
            return False
        i = max(bisect_right(at, lo) - 1, 0)
        while i < len(at) and at[i] < hi:
            if values[i] is True and (at[i + 1] if i + 1 < len(at) else self._length) > lo:
                return True
            i += 1
        return False

    def where(self, value: Value, ks: Sequence[int], start: int = 0) -> Iterator[int]:
        """The turns of ``ks`` (ascending) from ``start`` on at which the timeline is ``value``, in order:
        each of its runs of that value is looked up in ``ks``, so it costs the changes, not the turns."""
        for lo, hi, v in self.runs():
            if v is value and hi > start:
                for i in range(bisect_left(ks, max(lo, start)), bisect_left(ks, hi)):
                    yield ks[i]

    def to_json(self) -> list[list]:
        """The changes as ``[[k, value], …]``: from answered turn ``k`` on, ``value``."""
        return [[k, value] for k, value in zip(self._at, self._values)]


__all__ = ["Timeline"]
