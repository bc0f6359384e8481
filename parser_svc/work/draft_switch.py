"""Whether a running job's parse writes drafts: only once someone reads the job's pages while it
runs (StreamResult, GetResult with pages: state/page_parts.PageParts.want marks the record).
Drafts cost the stack a fifth of its throughput on a long PDF (bench/README.md, "Drafts on
demand"), so a job nobody reads does not pay for them.

The worker learns of a reader from one look at the record when the parse first reports a
document of more than one page (a reader that came while the job was queued or with the submit:
page 1 is drafted as soon as it would have been), and from the answer of each progress write
after that (a reader that came later: at most a progress interval, 0.2 s,
and a page behind it). It then creates the file the parse looks for at each page
(child/draft_pages.wanted_path), and the parse drafts the pages it read before, then each page.
"""

from __future__ import annotations

import logging
from pathlib import Path

from docparse.errors import DocparseError
from parser_svc.child.draft_pages import wanted_path
from parser_svc.state.page_parts import PageParts

log = logging.getLogger(__name__)


class DraftSwitch:
    """Turns one execution's drafts on, once."""

    def __init__(self, parts: PageParts, job_id: str, scratch: Path) -> None:
        self.parts, self.job_id, self.scratch = parts, job_id, scratch
        self.on = False
        self._looked = False

    def turn_on(self) -> None:
        """Drafts are wanted: the parse sees the file at its next page. A local file in the
        job's scratch directory: no trip to a thread for it."""
        if self.on:
            return
        self.on = True
        try:
            wanted_path(self.scratch).touch()
        except OSError as err:  # drafts are a courtesy: the job goes on without them
            log.info("job %s: drafts not turned on: %s", self.job_id, err)

    async def on_progress(self, total: int) -> None:
        """The parse's report: at its first of a document of more than one page, one look at
        the record's mark."""
        if self.on or self._looked or total <= 1:
            return
        self._looked = True
        try:
            wanted = await self.parts.wanted(self.job_id)
        except DocparseError as err:  # a blip: the next progress write's answer says it
            log.info("job %s: drafts mark not read: %s", self.job_id, err)
            return
        if wanted:
            self.turn_on()
