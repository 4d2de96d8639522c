"""`Suite`: the manifest plus what a notebook wants of it (its items, its checks, a readable table).

The schema (`SuiteManifest`) knows nothing of rows, items or display; this thin face adds
them on top, so the dependency points one way: suite -> items/display -> manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from evalnb.suite.display import suite_html, suite_text
from evalnb.suite.items import suite_items
from evalnb.suite.manifest import SuiteManifest

if TYPE_CHECKING:
    from evalnb.suite.checks import Problem
    from evalnb.suite.items import Item

__all__ = ["Suite"]


class Suite(SuiteManifest):
    """A versioned manifest: 1-100 tasks. Build it with ``from_dict`` or ``from_file``."""

    @classmethod
    def from_lm_eval(
        cls,
        tasks: str | Path | list[str | Path],
        *,
        num_fewshot: int | None = None,
        dataset_paths: Mapping[str, str | Path] | None = None,
        limit_rows: int | None = None,
        allow_paths_outside: bool = False,
    ) -> "Suite":
        """Import lm-evaluation-harness tasks: registry names, group or tag names, or task YAML paths.

        Each lm-eval task becomes one task with the same id; prompts and targets are lm-eval's,
        byte for byte (see `evalnb.suite.lm_eval_import` for what maps and what does not).
        ``num_fewshot`` overrides every task's; ``dataset_paths`` maps an lm-eval
        ``dataset_path`` (``"allenai/ai2_arc"``) to a local Hugging Face folder; ``limit_rows``
        caps the rows read (``max_rows``). Registry names need the ``lm-eval`` package; its task
        index is read once per process (10-25 s the first time). A task's ``include:`` and
        ``!function`` files must be in its YAML's folder (a registry task's: in lm-eval's own
        tasks tree): absolute paths, ``~`` and ``..`` out are refused naming the field, unless
        ``allow_paths_outside=True``. No task code runs here: hooks run later in the sandbox.
        """
        from evalnb.suite.lm_eval_import import suite_dict_from_lm_eval

        data = suite_dict_from_lm_eval(tasks, num_fewshot=num_fewshot, dataset_paths=dataset_paths,
                                       limit_rows=limit_rows, allow_paths_outside=allow_paths_outside)
        return cls.from_dict(data)

    def items(self, task_id: str, limit: int | None = None) -> list[Item]:
        """The task's rows rendered as Items (prompt, target, row), as the runner will send them."""
        return suite_items(self, task_id, limit=limit)

    def validate(self) -> list[Problem]:
        """What a run would trip over, found without calling a model: a list of `Problem`s.

        Loads each task's rows (all of a local file, a few of a Hugging Face dataset), runs
        its preprocessor on them, looks up every template field in them, builds its output
        extraction and loads its grader in the sandbox (without grading). ``[]`` means clean;
        ``str(problem)`` names the task, its position and the field. See `evalnb.suite.checks`.
        """
        from evalnb.suite.checks import check_suite

        return check_suite(self)

    def _repr_html_(self) -> str:
        """A static table of the tasks (reads the same in Jupyter and in an exported report)."""
        return suite_html(self)

    def __str__(self) -> str:
        return suite_text(self)

    def __repr__(self) -> str:
        """One line (not pydantic's dump of every field and grader source): version and tasks."""
        shown = ", ".join(f"{t.id} ({t.type})" for t in self.tasks[:8])
        more = f", ... ({len(self.tasks) - 8} more)" if len(self.tasks) > 8 else ""
        noun = "task" if len(self.tasks) == 1 else "tasks"
        return f"<evalnb.Suite {self.version[:12]}: {len(self.tasks)} {noun}: {shown}{more}>"
