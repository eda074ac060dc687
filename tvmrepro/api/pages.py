"""A page of a job's parts: the reports of a triage or the stored cases of a sweep that one read
of the job shows (GET /api/v1/jobs/<id>?offset=&limit=), so that reading a large job's first
screen costs what a small one's does; the rest of its answer (progress, groups, audit, counts)
is its summary, whole on every page."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from tvmrepro.settings import DEFAULT_PARTS_PAGE


@dataclass(frozen=True)
class PageAsked:
    """Which parts a read asks for: `limit` of them from the `offset`th (0: the first)."""

    offset: int = 0
    limit: int = DEFAULT_PARTS_PAGE

    def window(self, total: int) -> tuple[int, int]:
        """The slice [start, end) of `total` parts this page is."""
        start = min(self.offset, total)
        return start, min(total, start + self.limit)


# What report.md reads: every part (a report is pasted whole).
EVERY_PART = PageAsked(0, 1 << 62)


class PageShown(BaseModel):
    """Which parts a job's answer lists: those from `offset`, `limit` at most, of `total`."""

    offset: int
    limit: int
    total: int = Field(description="parts the answer has in all (so far, while it runs)")
    next_offset: int | None = Field(description="the offset of the next page (null: the last)")


def page_shown(page: PageAsked, total: int) -> PageShown:
    """What a page of `total` parts says of itself."""
    start, end = page.window(total)
    return PageShown(offset=start, limit=total if page is EVERY_PART else page.limit,
                     total=total, next_offset=end if end < total else None)
