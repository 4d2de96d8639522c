"""What a run is, checked before anything starts: models, tasks, limits and settings.

Validation lives here so the runner can assume a clean plan and a bad argument fails at once,
with a message naming the argument, instead of minutes into a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from evalnb.providers.model import Model
from evalnb.runner.executors.registry import executor_record

if TYPE_CHECKING:
    from evalnb.suite import Suite

MAX_MODELS = 20
MAX_CONCURRENCY = 25
DEFAULT_CONCURRENCY = 4
MAX_EPOCHS = 100
MAX_NAME = 200  # as the store's run name


@dataclass
class RunPlan:
    """Everything that decides a run's work, normalised."""

    suite: "Suite"
    models: list[Model]
    generation: dict[str, Any]
    task_ids: list[str]
    all_tasks: bool
    max_samples: int | None
    concurrency: int
    judge_model: Model | None
    embedding_model: Model | None
    grader_concurrency: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    reuse: bool = True
    epochs: int = 1
    network_tasks: frozenset[str] = frozenset()  # tasks whose user code keeps the network
    name: str | None = None  # a label for people (`evalnb runs`); not part of what the run computes
    executor: Any = "local"  # "local", "ray", "batch" or an executor object: where the calls are made
    judge_generation: dict[str, Any] = field(default_factory=dict)  # defaults of graders' model calls
    max_cost_usd: float | None = None  # the run's budget: no call starts that could pass it
    # prompt variants (`suite.variants`): `suite` is then the expanded suite (one task per
    # (task, variant) slot) and `task_ids` its slots; `base_suite` is the suite as given
    variants: Any = None
    base_suite: Any = None

    @property
    def base_task_ids(self) -> list[str]:
        """The run's tasks as the user named them (its slots' tasks, with variants)."""
        if self.variants is None:
            return list(self.task_ids)
        return list(dict.fromkeys(self.variants.slots[s][0] for s in self.task_ids))

    def stored_options(self) -> dict[str, Any]:
        """Every option that shapes this run, as JSON (no keys): what `resume` runs with again."""
        return {
            "generation": self.generation,
            "task_ids": None if self.all_tasks else self.base_task_ids,
            "max_samples": self.max_samples,
            "concurrency": self.concurrency,
            "grader_concurrency": self.grader_concurrency,
            "metadata": self.metadata,
            "reuse": self.reuse,
            "epochs": self.epochs,
            "allow_network": sorted({self.variants.slots[t][0] for t in self.network_tasks} if self.variants
                                    else self.network_tasks),
            "judge_model": model_record(self.judge_model) if self.judge_model else None,
            "embedding_model": model_record(self.embedding_model) if self.embedding_model else None,
            "executor": executor_record(self.executor),
            "judge_generation": self.judge_generation,
            "max_cost_usd": self.max_cost_usd,
            **({"variants": self.variants.overrides} if self.variants is not None else {}),
        }

    @property
    def priced(self) -> bool:
        """Does any model of the run (candidate, judge or embedding) have a price?"""
        return any(m is not None and m.price is not None for m in (*self.models, self.judge_model, self.embedding_model))


def as_model(value: Any, what: str = "model", *, bare: bool = False) -> Model:
    """Accept a Model, or a string ``name@base_url`` (Responses API, like ``Model``).

    A bare ``name`` without ``@`` is refused (``bare=False``): in Python ``"strong"`` reads as a
    stand-in's name, but would mean an OpenAI model. The CLI, whose ``--model NAME`` is
    documented as OpenAI's, passes ``bare=True``.
    """
    if isinstance(value, Model):
        return value
    if isinstance(value, str) and value.strip():
        name, sep, base_url = value.partition("@")
        if sep:
            return Model(name, base_url=base_url)
        if bare:
            return Model(name)
        raise TypeError(
            f"{what}: {value!r} is a bare string, which would mean OpenAI's model of that name; write "
            f"evalnb.Model({value!r}) for OpenAI (key from OPENAI_API_KEY), or "
            f"evalnb.Model({value!r}, base_url='http://host:port/v1', api='chat') for another server "
            f"(the string '{value}@http://host:port/v1' also works)"
        )
    raise TypeError(f"{what} must be an evalnb.Model or a 'name@base_url' string, got {value!r}")


def make_plan(
    suite: "Suite",
    models: Sequence[Any] | Any,
    *,
    generation: Any = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    task_ids: Sequence[str] | None = None,
    max_samples: int | None = None,
    judge_model: Any = None,
    embedding_model: Any = None,
    grader_concurrency: int | None = None,
    metadata: dict[str, Any] | None = None,
    reuse: bool = True,
    epochs: int = 1,
    allow_network: bool | Sequence[str] = False,
    name: str | None = None,
    executor: Any = "local",
    judge_generation: Any = None,
    max_cost_usd: float | None = None,
    variants: Any = None,
) -> RunPlan:
    """Every argument of `evalnb.run` checked, in this order (the first bad one is reported):
    suite, models, the counts, variants, task ids, name, generation, judge and embedding
    models, budget and executor, network access."""
    from evalnb.runner.executors.registry import check_executor
    from evalnb.suite.generation import Generation
    from evalnb.suite.variants import resolve_variants

    _check_suite(suite)
    model_list = _model_list(models)
    _check_counts(concurrency, max_samples, grader_concurrency, epochs)
    resolved = resolve_variants(suite, variants)  # ManifestError naming the variant and field
    known = [t.id for t in suite.tasks]
    chosen, all_tasks = _chosen_tasks(task_ids, known)
    _check_name(name)
    gen = Generation.from_value(generation).canonical()
    judge_gen = _judge_generation(judge_generation)
    _warn_unsent(model_list, gen)
    judge = as_model(judge_model, "judge_model") if judge_model is not None else None
    embedder = as_model(embedding_model, "embedding_model") if embedding_model is not None else None
    budget = check_budget(max_cost_usd)
    runner = check_executor(executor)
    if budget is not None:
        _check_budget_run(runner, model_list, gen, judge, judge_gen, budget, embedder)
    network_tasks = _network_tasks(allow_network, chosen, known)
    base_suite = suite
    if resolved is not None:  # the runner sees one ordinary task per (task, variant)
        _check_variant_names(resolved.names, [m.label for m in model_list])
        suite, chosen = resolved.suite, resolved.slot_ids(chosen)
        network_tasks = frozenset(resolved.slot_ids(sorted(network_tasks)))
    return RunPlan(
        suite=suite,
        models=model_list,
        generation=gen,
        task_ids=chosen,
        all_tasks=all_tasks,
        max_samples=max_samples,
        concurrency=concurrency,
        judge_model=judge,
        embedding_model=embedder,
        grader_concurrency=grader_concurrency,
        metadata=dict(metadata or {}),
        reuse=bool(reuse),
        epochs=epochs,
        network_tasks=network_tasks,
        name=name,
        executor=runner,
        judge_generation=judge_gen,
        max_cost_usd=budget,
        variants=resolved,
        base_suite=base_suite,
    )


def _check_suite(suite: Any) -> None:
    from evalnb.suite import Suite

    if not isinstance(suite, Suite):
        raise TypeError(f"suite must be an evalnb.Suite, got {type(suite).__name__}")


def _model_list(models: Any) -> list[Model]:
    """``models`` (one model, or a sequence of them) as 1 to MAX_MODELS Models with unique labels."""
    if isinstance(models, (Model, str)):
        models = [models]
    model_list = [as_model(m, f"models[{i}]") for i, m in enumerate(list(models or []))]
    if not 1 <= len(model_list) <= MAX_MODELS:
        raise ValueError(f"models: a run takes 1 to {MAX_MODELS} models, got {len(model_list)}")
    labels = [m.label for m in model_list]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ValueError(
            f"models: labels must be unique, {dupes} appear more than once; "
            "give each a distinct label=..."
        )
    return model_list


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_counts(concurrency: Any, max_samples: Any, grader_concurrency: Any, epochs: Any) -> None:
    if not _is_int(concurrency) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}, got {concurrency!r}")
    if max_samples is not None and (not _is_int(max_samples) or max_samples < 1):
        raise ValueError(f"max_samples must be a positive integer or None, got {max_samples!r}")
    if grader_concurrency is not None and (not _is_int(grader_concurrency) or grader_concurrency < 1):
        raise ValueError(f"grader_concurrency must be a positive integer or None, got {grader_concurrency!r}")
    if not _is_int(epochs) or not 1 <= epochs <= MAX_EPOCHS:
        raise ValueError(f"epochs must be an integer from 1 to {MAX_EPOCHS} (how often each item is asked), got {epochs!r}")


def _chosen_tasks(task_ids: Any, known: list[str]) -> tuple[list[str], bool]:
    """The tasks to run (each once, in the order given) and whether that is all of them."""
    if task_ids is None:
        return known, True
    if isinstance(task_ids, str):
        task_ids = [task_ids]
    chosen = list(dict.fromkeys(task_ids))
    unknown = [t for t in chosen if t not in known]
    if unknown or not chosen:
        raise ValueError(f"task_ids: unknown task(s) {unknown}; the suite has {known}")
    return chosen, False


def _check_name(name: Any) -> None:
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME):
        raise ValueError(f"name: a run name must be 1-{MAX_NAME} characters of text, got {name!r}")


def _check_budget_run(runner: Any, models: list[Model], gen: dict[str, Any], judge: Model | None,
                      judge_gen: dict[str, Any], budget: float, embedder: Model | None) -> None:
    """A budget is checked before every call in this process: local or batch executors only,
    and every priced call bounded (`_check_bounded`)."""
    if runner != "local" and runner != "batch" and getattr(runner, "name", None) != "batch":
        # a budget is checked before every call; Ray workers make theirs on their own
        raise ValueError("max_cost_usd: a budget needs executor='local' or 'batch' (each call is checked "
                         "against it before it starts, in this process); Ray runs record and price every call but "
                         "cannot stop at a budget")
    _check_bounded(models, gen, judge, judge_gen, budget, embedder)


def _network_tasks(allow_network: Any, chosen: list[str], known: list[str]) -> frozenset[str]:
    """``allow_network`` (True, False/None, or task ids) as the chosen tasks that keep the network."""
    if allow_network is True:
        return frozenset(chosen)
    if allow_network is False or allow_network is None:
        return frozenset()
    if isinstance(allow_network, str):
        allow_network = [allow_network]
    if not isinstance(allow_network, (list, tuple, set, frozenset)):
        raise TypeError(f"allow_network must be True, False or a list of task ids, got {allow_network!r}")
    unknown = sorted(set(allow_network) - set(known))
    if unknown:
        raise ValueError(f"allow_network: unknown task(s) {unknown}; the suite has {known}")
    return frozenset(allow_network) & frozenset(chosen)


def _check_variant_names(variants: list[str], labels: list[str]) -> None:
    """A variant named like a model would make ``result.paired(name, ...)`` ambiguous: refused."""
    from evalnb.errors import ManifestError

    both = [v for v in variants if v in labels]
    if both:
        raise ManifestError([{"loc": f"variants[{v!r}]", "type": "value_error",
                              "msg": f"{v!r} is both a variant name and a model label; rename one (paired({v!r}, ...) "
                                     "would not know which is meant)"} for v in both])


def _warn_unsent(models: list[Model], gen: dict[str, Any]) -> None:
    """A generation field some model's endpoint will not get (top_k for OpenAI, ...): say so once."""
    import warnings

    from evalnb.providers import unsent_fields

    by_fields: dict[tuple[str, ...], list[str]] = {}
    for m in models:
        skipped = tuple(unsent_fields(gen, api=m.api, is_openai=m.is_openai))
        if skipped:
            by_fields.setdefault(skipped, []).append(m.label)
    for fields, labels in by_fields.items():
        warnings.warn(f"generation: {', '.join(fields)} not sent to {', '.join(labels)} (its endpoint does not take "
                      "them; provider pass-through goes only to servers that are not OpenAI)", UserWarning, stacklevel=4)


def check_budget(max_cost_usd: Any) -> float | None:
    """``max_cost_usd``: None (no budget) or a finite number of USD >= 0."""
    import math

    if max_cost_usd is None:
        return None
    if isinstance(max_cost_usd, bool) or not isinstance(max_cost_usd, (int, float)) or not math.isfinite(max_cost_usd) \
            or max_cost_usd < 0:
        raise ValueError(f"max_cost_usd must be a number of USD >= 0 (or None for no budget), got {max_cost_usd!r}")
    return float(max_cost_usd)


def _judge_generation(value: Any) -> dict[str, Any]:
    """judge_generation, validated like ``generation`` (its errors located at judge_generation.<field>)."""
    from evalnb.errors import ManifestError
    from evalnb.suite.generation import Generation

    if value is None:
        return {}
    try:
        return Generation.from_value(value).canonical()
    except ManifestError as exc:
        errors = [{**e, "loc": "judge_" + str(e.get("loc") or "generation")} for e in exc.errors]
        raise ManifestError(errors) from None


def _check_bounded(models: list[Model], gen: dict[str, Any], judge: Model | None, judge_gen: dict[str, Any],
                   budget: float, embedder: Model | None = None) -> None:
    """A budget needs every priced call to have a worst case: a cap on its output tokens."""
    import warnings

    priced = [m for m in models if m.price is not None]
    if priced and "max_output_tokens" not in gen:
        raise ValueError(
            f"max_cost_usd={budget:g}: {priced[0].label!r} has a price but generation sets no max_output_tokens, so "
            "a call's cost has no upper bound; set generation={'max_output_tokens': N} (alias max_gen_toks)"
        )
    if judge is not None and judge.price is not None and "max_output_tokens" not in judge_gen:
        raise ValueError(
            f"max_cost_usd={budget:g}: the judge {judge.label!r} has a price but judge_generation sets no "
            "max_output_tokens, so a judge call's cost has no upper bound; set judge_generation={'max_output_tokens': N}"
        )
    if not priced and all(m is None or m.price is None for m in (judge, embedder)):
        warnings.warn(
            f"max_cost_usd={budget:g} is set but no model has a price (evalnb.Model(..., price={{'input': ..., "
            "'output': ...}}, USD per 1M tokens)): every call counts as 0 and the budget never stops the run",
            UserWarning, stacklevel=5,  # make_plan's caller's caller: the user's line
        )


def model_record(model: Any) -> dict[str, Any]:
    """What resume needs to rebuild a model: where it is, which variable holds its key (never the
    key) and its price."""
    return {**model.describe(), "api_key_env": model.api_key_env, "price": model.price}


def rebuild_model(record: Any) -> Any:
    if isinstance(record, str) and "@" not in record:
        return Model(record)  # a bare name stored by an older run: it meant OpenAI's model then too
    if not isinstance(record, dict):
        return record  # None, or "name@base_url"
    return Model(record["name"], base_url=record.get("base_url"), api=record.get("api") or "responses",
                 label=record.get("label"), api_key_env=record.get("api_key_env"), price=record.get("price"))
