"""The fenced blocks of a Markdown page, in order, with the marker comment written just above each.

A page's examples are run by `tests/test_docs_examples.py`. Markers (an HTML comment on the
line right above the opening fence):

- ``<!-- not run: reason -->``: the block is shown, not run (the reason is counted and printed);
- ``<!-- file: name -->``: the block's text is written to ``name`` in the page's folder (a
  manifest the next Python block loads), instead of being run.

Python blocks run in one interpreter per page; bash blocks run with ``bash -eo pipefail`` in the
same folder, between them; ``console`` blocks (``$ command`` lines followed by their output) run
each command and compare what it printed with what the page shows. Other languages are shown only,
and so are MyST directives (```` ```{toctree} ````: the "language" is ``{toctree}``).

Every fence must name its language: a bare ```` ``` ```` is refused (`blocks` raises), because a
shell command in one would be neither run nor counted as not run: a silent gap in the checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN = ("python", "bash", "console")
_FENCE = re.compile(r"^(`{3,})(\{[\w-]+\}|[\w+-]*)[^\n]*$")
_MARKER = re.compile(r"^<!--\s*(not run|file)\s*:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None = None  # the reason, when marked
    file: str | None = None  # write the code to this file instead of running it

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path, root: Path) -> list[Block]:
    """Every fenced block of the page at ``path`` (top-level fences only: not indented)."""
    page = str(path.relative_to(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.group(1), opening.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: the fence opened here is never closed")
        if not lang:
            raise ValueError(f"{page}:{i + 1}: a fence with no language: name it (```bash, ```text, ...) so "
                             "the block is run or marked `<!-- not run: reason -->`, never skipped unseen")
        marker = _MARKER.match(lines[i - 1].strip()) if i > 0 else None
        kind, value = (marker.group(1), marker.group(2)) if marker else (None, None)
        if kind == "not run" and not value:
            raise ValueError(f"{page}:{i}: `<!-- not run: reason -->` needs its reason")
        found.append(Block(page, i + 1, lang, "\n".join(lines[i + 1:end]) + "\n",
                           not_run=value if kind == "not run" else None,
                           file=value if kind == "file" else None))
        i = end + 1
    return found
