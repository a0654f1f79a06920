"""The MemLens report bundle (``core.report.bundle``): a comparison's conversation, its configs and
facts, read back with :func:`core.report.bundle.parse_report`."""

from __future__ import annotations

from typing import Any, Iterable

from core.io.errors import RecordError
from core.model.conversation import Conversation
from core.report.bundle import FORMAT as REPORT_FORMAT
from core.report.bundle import parse_report
from core.report.errors import BundleFieldError

from .records import ReadContext, Records
from .registry import Format


def _read(records: Records, ctx: ReadContext) -> Iterable[Conversation]:
    def parse(value: Any, index: int | None) -> Conversation:
        try:
            return parse_report(value)
        except BundleFieldError as e:
            raise RecordError(str(e), e.field) from None

    return ctx.each(records, parse)


FORMAT = Format(
    REPORT_FORMAT,
    "MemLens report bundle (a comparison's conversation, configs and facts)",
    lambda first, layout: layout == "document" and isinstance(first, dict) and first.get("format") == REPORT_FORMAT,
    _read,
)
