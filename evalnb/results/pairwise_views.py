"""The pairwise views a `RunResult` owns: pairwise, win_rate, rank, and the stored judgements.

Kept apart from `run_result` because "which of two outputs is better" is its own job: pair the
candidates' answers item by item (`candidates`), have the judge read each pair in both orders
(`runner.pairwise_pass`, which stores every verdict), combine the orders (`pairwise_judge`),
then count (`win_rates`) and rank (`bradley_terry`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import combinations
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.store import Store

__all__ = ["PAIRWISE_COLUMNS", "PairwiseJudging", "all_pairs", "pairs_from_calls"]

PAIRWISE_COLUMNS = ("task_id", "sample_index", "epoch", "a", "b", "verdict", "verdict_ab", "verdict_ba",
                    "consistent", "error")
_KEYS = ["task_id", "sample_index", "epoch"]


class PairwiseJudging:
    """One run's pairwise judgements. ``samples()`` gives the samples frame, ``models()`` the labels,
    ``tasks(task_id)`` the chosen task ids (checked)."""

    def __init__(self, store: Store | None, run_id: str | None, *, samples: Callable[[], pd.DataFrame],
                 models: Callable[[], list[str]], tasks: Callable[[Any], list[str]]) -> None:
        self._store, self._run_id = store, run_id
        self._samples, self._models, self._tasks = samples, models, tasks

    # ---- judging --------------------------------------------------------------------------
    def judge(self, pairs: list[tuple[str, str]], *, judge_model: Any, task_id: Any, template: str | None,
              swap: bool, concurrency: int, judge_generation: Any = None,
              max_cost_usd: float | None = None) -> dict[tuple[str, str], tuple[pd.DataFrame, pd.DataFrame]]:
        """(a, b) -> (the pairwise frame, its answers: both outputs per row) for every pair, in one pass."""
        from evalnb.results.pairwise_judge import check_template
        from evalnb.runner.pairwise_pass import Call, judge_calls

        if self._store is None or self._run_id is None:
            raise ValueError("pairwise judging needs a stored run (its verdicts are kept with it): "
                             "evalnb.load_run(run_id)")
        if template is not None:
            check_template(template)
        if not isinstance(swap, bool):
            raise TypeError(f"swap must be True or False, got {swap!r}")
        answers = {pair: self._answers(*pair, task_id) for pair in pairs}
        calls = []
        for (a, b), both in answers.items():
            for row in both.itertuples(index=False):
                orders = [(a, b, row.out_a, row.out_b)] + ([(b, a, row.out_b, row.out_a)] if swap else [])
                calls += [Call(row.task_id, int(row.sample_index), int(row.epoch), first, second, row.prompt, x, y,
                               row.target) for first, second, x, y in orders]
        verdicts = judge_calls(self._store, self._run_id, calls, judge_model=judge_model, template=template,
                               judge_generation=judge_generation, concurrency=concurrency, max_cost_usd=max_cost_usd)
        return {(a, b): (_frame(both, a, b, verdicts, swap), both) for (a, b), both in answers.items()}

    def _answers(self, a: str, b: str, task_id: Any) -> pd.DataFrame:
        """The items both candidates answered: keys, prompt, target, out_a, out_b."""
        from evalnb.results.candidates import candidate_samples

        if a == b:
            raise ValueError(f"a and b are the same candidate ({a!r}): compare two different ones")
        samples = self._samples()
        tasks = self._tasks(task_id)
        samples = samples[samples["task_id"].isin(tasks)]
        mine = candidate_samples(samples, a, where="a")
        theirs = candidate_samples(samples, b, where="b")
        left = mine.assign(prompt=_question(mine), out_a=mine["output_text"])[[*_KEYS, "prompt", "target", "out_a"]]
        right = theirs.assign(prompt_b=_question(theirs), out_b=theirs["output_text"])[[*_KEYS, "prompt_b", "out_b"]]
        both = left.merge(right, on=_KEYS)
        # Prompt variants ask differently: the judge reads the question of the candidate listed
        # first in the run (the first variant), whichever is named `a`, so (a, b) and (b, a) ask the same.
        order = self._models()
        if (order.index(b) if b in order else len(order)) < (order.index(a) if a in order else len(order)):
            both["prompt"] = both["prompt_b"]
        both = both.drop(columns="prompt_b")
        answered = both["out_a"].map(_answered) & both["out_b"].map(_answered)
        return both[answered].reset_index(drop=True)

    # ---- what is stored -------------------------------------------------------------------
    def stored(self) -> tuple[dict[str, Any] | None, pd.DataFrame]:
        """(the judge set-up used last, its judged pairs as a pairwise frame); (None, empty) without any."""
        import pandas as pd

        empty = pd.DataFrame(columns=list(PAIRWISE_COLUMNS))
        if self._store is None or self._run_id is None:
            return None, empty
        judges = self._store.pairwise_judges(self._run_id)
        if not judges:
            return None, empty
        judge = judges[-1]
        calls = self._store.pairwise_calls(self._run_id, judge["judge"])
        return judge, pairs_from_calls(calls, self._models())


def _question(samples: pd.DataFrame) -> Any:
    """The question an answer answers: the prompt without few-shot examples when the run kept it."""
    if "prompt_text" not in samples.columns:
        return samples["prompt"]
    return samples["prompt_text"].where(samples["prompt_text"].map(_answered), samples["prompt"])


def _answered(text: Any) -> bool:
    return isinstance(text, str) and bool(text.strip())


def _frame(both: pd.DataFrame, a: str, b: str, verdicts: dict, swap: bool) -> pd.DataFrame:
    """The pairwise frame of one (a, b) from the judge's positional verdicts."""
    rows = []
    for row in both.itertuples(index=False):
        key = (row.task_id, int(row.sample_index), int(row.epoch))
        ab = verdicts[(*key, a, b)]
        ba = verdicts[(*key, b, a)] if swap else None
        rows.append(_combined(key, a, b, ab, ba, swap))
    return _as_frame(rows)


def _combined(key: tuple, a: str, b: str, ab: dict | None, ba: dict | None, swap: bool) -> dict[str, Any]:
    from evalnb.results.pairwise_judge import combine, in_candidate_terms

    v_ab = in_candidate_terms(ab["verdict"], a_first=True) if ab else None
    v_ba = in_candidate_terms(ba["verdict"], a_first=False) if ba else None
    errors = [f"{first} first: {c['error']}" for first, c in ((a, ab), (b, ba)) if c and c.get("error")]
    if ab is None or (swap and ba is None):
        errors.append("not judged in both orders" if swap else "not judged")
    verdict, consistent = combine(v_ab, v_ba, swap=swap)
    return {"task_id": key[0], "sample_index": key[1], "epoch": key[2], "a": a, "b": b, "verdict": verdict,
            "verdict_ab": v_ab, "verdict_ba": v_ba, "consistent": consistent,
            "error": "; ".join(errors) if errors else None}


def _as_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame.from_records(rows, columns=list(PAIRWISE_COLUMNS))
    frame["consistent"] = pd.array(frame["consistent"].tolist(), dtype="boolean")
    return frame.astype({"sample_index": "int64", "epoch": "int64"})


def pairs_from_calls(calls: Iterable[dict[str, Any]], order: list[str]) -> pd.DataFrame:
    """A pairwise frame from stored judge calls: each unordered pair once, ``a`` the candidate that
    comes first in ``order`` (then by name); judged both ways when both orders were stored."""
    rank = {name: i for i, name in enumerate(order)}
    by_pair: dict[tuple, dict[tuple[str, str], dict]] = {}
    for c in calls:
        first, second = c["first"], c["second"]
        a, b = sorted((first, second), key=lambda n: (rank.get(n, len(rank)), n))
        by_pair.setdefault((c["task_id"], c["sample_index"], c["epoch"], a, b), {})[(first, second)] = c
    rows = []
    for (task, index, epoch, a, b), found in by_pair.items():
        swap = len(found) == 2
        ab, ba = found.get((a, b)), found.get((b, a))
        if ab is None:  # only b-first was stored: read it as a one-order judgement of (b, a)
            a, b, ab, ba = b, a, ba, None
        rows.append(_combined((task, index, epoch), a, b, ab, ba, swap))
    return _as_frame(rows)


def all_pairs(names: list[str]) -> list[tuple[str, str]]:
    """Every unordered pair of candidates, in ``names`` order."""
    return list(combinations(names, 2))
