"""lm-eval task configs -> an evalnb suite manifest (``Suite.from_lm_eval``, ``evalnb import-lm-eval``).

Each lm-eval task becomes one evalnb task with the same id. Everything lm-eval computes from a
doc (Jinja ``doc_to_text``/``doc_to_target``/``doc_to_choice``, ``!function`` hooks,
``process_docs``, description, delimiters, few-shot rendering) is done by one generated batch
preprocessor (`evalnb.suite.lm_eval_runtime`, with the task's ``utils.py`` sources carried
in), which adds an ``lm_eval`` field to each row; the manifest's templates only read it
(``{{lm_eval.prompt}}``), so prompts are lm-eval's byte for byte. Scoring is a generated grader
(`evalnb.suite.lm_eval_grading`). What maps:

- **Data**: ``dataset_path``/``dataset_name``/``dataset_kwargs`` -> a Hugging Face dataset
  (``dataset_paths`` maps a ``dataset_path`` to a local folder); evaluated split: ``test_split``,
  else ``validation_split``. A local ``dataset_path`` must be in the task's folder (a relative
  one is read from the YAML's folder), see `evalnb.suite.lm_eval_data_paths`.
- **Few-shot**: ``num_fewshot`` (the argument wins); the pool is lm-eval's (``fewshot_split``,
  else the training, validation, then test split); ``first_n`` -> ``strategy: first`` (the
  same examples as lm-eval); the default sampler -> ``strategy: random, seed: 1234``: distinct
  examples per row, deterministic, rendered as lm-eval renders them, but not the ones lm-eval
  draws (it runs one ``Random(1234)`` through the docs in order). The evaluated doc is left
  out of the pool only when lm-eval leaves it out (``fewshot_split == test_split``). Examples
  written into the config (``fewshot_config.samples``, a list or a ``!function``) are rendered
  by the preprocessor and put, with the description, before the question (``first_n``: the
  same block for every row, exactly lm-eval's; default sampler: a deterministic draw per row).
- **Scoring**: ``multiple_choice`` -> ``loglikelihood: {type: multiple_choice}`` (with
  ``contexts`` for multiple-input docs: winogrande), ``generate_until`` -> a ``qa`` task whose
  grader runs each ``filter_list`` pipeline, with ``generation_kwargs`` as the task's own
  ``generation`` block and lm-eval's defaults (greedy, 256 tokens, seed 1234) as its
  ``defaults``. Metrics are lm-eval's, aggregated as it aggregates them
  (`evalnb.suite.lm_eval_aggregations`): means per sample, corpus ``bleu``/``chrf``/``ter``,
  ``f1``/``mcc``/``brier_score`` and ``!function`` aggregations over the task, a custom
  ``process_results`` run in the sandbox. ``repeats: N`` (self-consistency,
  ``majority_vote``) -> a batch grader over each item's first N epochs; evalnb has no
  per-task epochs, so the import warns to run with ``epochs=N`` and the grader says so when
  items lack answers.

What does not map raises `LmEvalImportError` naming the task and the field: Python class
tasks, ``custom_dataset``, promptsource ``use_prompt``, images/audio, samplers other than
``default``/``first_n``, and metrics, aggregations or filters the grader does not implement
(or that lm-eval itself could not aggregate).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any, Mapping

from evalnb.errors import LmEvalImportError

__all__ = ["FEWSHOT_SEED", "import_task", "suite_dict_from_lm_eval"]

FEWSHOT_SEED = 1234  # lm-eval's default fewshot_random_seed
_OUTPUT_TYPES = ("multiple_choice", "generate_until", "loglikelihood", "loglikelihood_rolling")
_TASK_TYPE = {"multiple_choice": "multiple_choice", "generate_until": "qa",
              "loglikelihood": "custom", "loglikelihood_rolling": "custom"}
_UNSUPPORTED = {
    "class": "Python class tasks",
    "custom_dataset": "custom_dataset (a Python dataset builder)",
    "use_prompt": "promptsource prompts (use_prompt)",
    "doc_to_image": "image inputs (doc_to_image)",
    "doc_to_audio": "audio inputs (doc_to_audio)",
}
# what lm-eval's process_results gives each built-in metric (a number, or what its aggregation takes)
_NUMBER_METRICS = {"multiple_choice": ("acc", "acc_norm", "acc_bytes", "exact_match"),
                   "generate_until": ("exact_match",), "loglikelihood": ("acc",), "loglikelihood_rolling": ()}
_PAIR_METRICS = {"multiple_choice": ("f1", "mcc", "brier_score", "likelihood"),
                 "generate_until": ("bleu", "chrf", "chrf++", "ter", "f1", "mcc", "acc", "acc_norm", "acc_bytes",
                                    "likelihood", "brier_score"),  # registered pass-throughs: (gold, answer)
                 "loglikelihood": ("perplexity",),
                 "loglikelihood_rolling": ("word_perplexity", "byte_perplexity", "bits_per_byte")}
_FILTERS = ("regex", "multi_choice_regex", "take_first", "take_first_k", "majority_vote", "remove_whitespace",
            "lowercase", "uppercase", "map")
_DEFAULT_METRICS = {"multiple_choice": ["acc", "acc_norm"], "generate_until": ["exact_match"],
                    "loglikelihood": ["perplexity", "acc"],
                    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"]}
_ID = re.compile(r"[^A-Za-z0-9_.\-]")


def suite_dict_from_lm_eval(
    tasks: str | Path | list[str | Path],
    *,
    num_fewshot: int | None = None,
    dataset_paths: Mapping[str, str | Path] | None = None,
    limit_rows: int | None = None,
    allow_paths_outside: bool = False,
) -> dict[str, Any]:
    """A manifest dict with one task per lm-eval task (groups and tags expanded). ``include:``,
    ``!function`` and group member files, and local dataset folders, stay in each task's folder
    unless ``allow_paths_outside=True`` (`evalnb.suite.lm_eval_data_paths`)."""
    from evalnb.suite.lm_eval_data_paths import confined_dataset_paths
    from evalnb.suite.lm_eval_registry import resolve_tasks

    specs = resolve_tasks(tasks, allow_paths_outside=allow_paths_outside)
    if not specs:
        raise LmEvalImportError(f"{tasks!r} names no lm-eval task")
    paths = {str(k): str(v) for k, v in (dataset_paths or {}).items()}
    return {
        "tasks": [import_task(s.name, confined_dataset_paths(s.config, s.folder, s.root, paths,
                                                             f"lm-eval task {s.name!r} ({s.source})"),
                              s.modules, num_fewshot=num_fewshot, dataset_paths=paths, limit_rows=limit_rows)
                  for s in specs],
        "metadata": {"source": "lm-eval", "lm_eval_version": _lm_eval_version()},
    }


def import_task(
    name: str,
    config: dict[str, Any],
    modules: dict[str, str],
    *,
    num_fewshot: int | None = None,
    dataset_paths: Mapping[str, str] | None = None,
    limit_rows: int | None = None,
) -> dict[str, Any]:
    """One lm-eval task config (includes merged, hooks as ``{"function": ref}``) -> an evalnb task.

    The steps: the config checked, the split and the shot count, the dataset, the few-shot
    examples, the runtime the preprocess hook evaluates, the grader and metrics, the request shape."""
    where = f"lm-eval task {name!r}"
    output_type = _checked_output_type(config, where)
    count = _shot_count(config, num_fewshot, where)
    test_split = config.get("test_split")
    eval_split = test_split or config.get("validation_split")
    if eval_split is None:
        raise LmEvalImportError(f"{where}: neither test_split nor validation_split is set")
    dataset = _dataset(config, eval_split, dataset_paths or {}, limit_rows)
    runtime = _runtime(config, output_type)
    task: dict[str, Any] = {
        "id": _ID.sub("_", name),
        "name": config.get("task_alias") or name,
        "type": _TASK_TYPE[output_type],
        "dataset": dataset,
        "prompt_template": "{{lm_eval.prompt}}",
        "target_template": "{{lm_eval.target}}",
    }
    _add_shots(task, runtime, config, count, test_split, dataset_paths or {}, where)
    task["preprocess"] = {"type": "python", "contract": "batch", "source": _runtime_source(runtime, modules)}
    task["grader"], task["metrics"], repeats = _scoring(config, output_type, name, modules, where)
    if output_type in _LOGLIKELIHOOD:
        task["loglikelihood"] = dict(_LOGLIKELIHOOD[output_type])
    if output_type == "generate_until":
        task["generation"] = _generation(config, where)
    task["metadata"] = {"lm_eval_task": name, "lm_eval_output_type": output_type,
                        "lm_eval_num_fewshot": count}
    if repeats > 1:
        task["metadata"]["lm_eval_repeats"] = repeats
        warnings.warn(f"{where} has repeats: {repeats} (each doc answered {repeats} times); evalnb has no "
                      f"per-task epochs: run it with evalnb.run(..., epochs={repeats}), or its grader reports "
                      "that the items lack answers", stacklevel=2)
    return task


# each log-likelihood output type's request shape (the fields the preprocess hook fills)
_LOGLIKELIHOOD: dict[str, dict[str, str]] = {
    "multiple_choice": {"type": "multiple_choice", "continuations": "lm_eval.continuations",
                        "contexts": "lm_eval.contexts"},
    "loglikelihood": {"type": "loglikelihood", "continuations": "lm_eval.continuations"},
    "loglikelihood_rolling": {"type": "loglikelihood_rolling"},
}


def _checked_output_type(config: dict[str, Any], where: str) -> str:
    """The config's output type, after refusing what does not map (unsupported keys, a
    multiple-input task that is not multiple_choice, no dataset, a process_results that is no hook)."""
    for key, what in _UNSUPPORTED.items():
        if config.get(key) is not None:
            raise LmEvalImportError(f"{where}: {key}: {what} do not map to evalnb")
    output_type = config.get("output_type", "generate_until")
    if output_type not in _OUTPUT_TYPES:
        raise LmEvalImportError(f"{where}: output_type {output_type!r} is not one of {', '.join(_OUTPUT_TYPES)}")
    if isinstance(config.get("doc_to_text"), int) and (output_type != "multiple_choice"
                                                        or config.get("doc_to_choice") is None):
        raise LmEvalImportError(f"{where}: doc_to_text is a choice index (a multiple-input task) but the task is "
                                f"not multiple_choice with doc_to_choice; lm-eval cannot score it either")
    if config.get("dataset_path") is None:
        raise LmEvalImportError(f"{where}: dataset_path is missing")
    if config.get("process_results") is not None and not _is_hook(config["process_results"]):
        raise LmEvalImportError(f"{where}: process_results must be a !function hook "
                                f"(found {config['process_results']!r})")
    return output_type


def _shot_count(config: dict[str, Any], num_fewshot: int | None, where: str) -> int:
    """The caller's ``num_fewshot``, else the config's (0 when unset)."""
    count = num_fewshot if num_fewshot is not None else (config.get("num_fewshot") or 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise LmEvalImportError(f"{where}: num_fewshot must be a non-negative integer (found {count!r})")
    return count


def _runtime(config: dict[str, Any], output_type: str) -> dict[str, Any]:
    """What the preprocess hook needs to build lm-eval's prompt, target and choices (no shots yet)."""
    runtime = {key: config.get(key) for key in ("doc_to_text", "doc_to_target", "doc_to_choice",
                                                  "gen_prefix", "process_docs")}
    runtime.update(output_type=output_type, description=config.get("description") or "",
                   target_delimiter=config.get("target_delimiter", " "),
                   fewshot_delimiter=config.get("fewshot_delimiter", "\n\n"))
    return runtime


def _add_shots(task: dict[str, Any], runtime: dict[str, Any], config: dict[str, Any], count: int,
               test_split: str | None, paths: Mapping[str, str], where: str) -> None:
    """The few-shot examples: written in the config (``inline_shots``, drawn by the hook) or
    drawn from a split (the task's ``fewshot`` block); the description template when either
    needs it."""
    fewshot_cfg = config.get("fewshot_config") or {}
    inline = bool(count) and _inline_samples(config, fewshot_cfg)
    if runtime["description"] or inline:
        task["description"] = "{{lm_eval.description}}"
    if count:
        runtime["fewshot"] = _fewshot_runtime(config, fewshot_cfg, where)
    if inline:
        sampler = fewshot_cfg.get("sampler", "default")
        if sampler not in ("default", "first_n"):
            raise LmEvalImportError(f"{where}: fewshot_config.sampler {sampler!r} is not supported (default, first_n are)")
        runtime["inline_shots"] = {"samples": fewshot_cfg["samples"], "count": count, "sampler": sampler,
                                   "seed": FEWSHOT_SEED}
    elif count:
        task["fewshot"] = _fewshot(config, fewshot_cfg, count, test_split, task["dataset"], paths, where)


def _scoring(config: dict[str, Any], output_type: str, name: str, modules: dict[str, str],
             where: str) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The task's grader, its metric list and its ``repeats``: a per-sample grader when every
    metric is a mean of numbers, else a batch grader aggregating as lm-eval does."""
    process_results = config.get("process_results")
    metrics = _metrics(config, output_type, where)
    filters = _filters(config, output_type, where)
    repeats = _repeats(config, output_type, filters, where)
    if repeats > 1 and (process_results is not None or any(m["metric"] != "exact_match" for m in metrics)):
        raise LmEvalImportError(f"{where}: repeats {repeats} is supported with exact_match only")
    per_sample = (output_type in ("multiple_choice", "generate_until") and repeats == 1 and process_results is None
                  and all(_aggregation(m) == "mean" for m in metrics))
    grading = {"output_type": output_type, "metrics": metrics, "filters": filters, "task": name,
               "repeats": repeats, "process_results": process_results}
    grader = {"type": "python", "contract": "sample" if per_sample else "batch",
              "source": _grader_source(grading, modules)}
    ids = [{"id": metric_id, "higher_is_better": better} for metric_id, better in
           _metric_ids(metrics, filters, output_type)]
    return grader, ids, repeats


_GENERATION_KEYS = ("until", "max_gen_toks", "temperature", "top_p", "top_k", "do_sample")
# what lm-eval's local-completions sends when generation_kwargs does not say (openai_completions.py)
LM_EVAL_GENERATION_DEFAULTS = {"temperature": 0.0, "max_output_tokens": 256, "seed": 1234}


def _generation(config: dict[str, Any], where: str) -> dict[str, Any]:
    """``generation_kwargs`` as the task's generation block, with lm-eval's defaults beside them.

    ``until`` is what lm-eval's TaskConfig computes (the YAML's, else the few-shot delimiter),
    so it is the task's own; ``do_sample`` is dropped, as lm-eval's API models drop it; greedy
    ``temperature`` 0, ``max_gen_toks`` 256 and ``seed`` 1234 are ``defaults``: the run's
    ``generation`` wins over them, the task's own fields over both."""
    kwargs = dict(config.get("generation_kwargs") or {})
    unknown = sorted(set(kwargs) - set(_GENERATION_KEYS))
    if unknown:
        raise LmEvalImportError(f"{where}: generation_kwargs {', '.join(unknown)} not supported "
                                f"({', '.join(_GENERATION_KEYS)} are)")
    out = {key: kwargs[key] for key in _GENERATION_KEYS if key != "do_sample" and kwargs.get(key) is not None}
    if "until" not in out:
        out["until"] = [config.get("fewshot_delimiter", "\n\n")]  # lm-eval's TaskConfig default
    if "temperature" in out:
        out["temperature"] = float(out["temperature"])
    out["defaults"] = dict(LM_EVAL_GENERATION_DEFAULTS)
    return out


def _dataset(config: dict[str, Any], split: str, paths: Mapping[str, str], limit_rows: int | None) -> dict[str, Any]:
    path = str(config["dataset_path"])
    out: dict[str, Any] = {"path": paths.get(path, path), "split": split}
    if config.get("dataset_name") is not None:
        out["name"] = str(config["dataset_name"])
    kwargs = {k: v for k, v in (config.get("dataset_kwargs") or {}).items() if k != "trust_remote_code"}
    if "data_files" in kwargs:
        kwargs["data_files"] = _https_files(kwargs["data_files"])
    if kwargs:
        out["dataset_kwargs"] = kwargs
    if limit_rows is not None:
        out["max_rows"] = limit_rows
    return out


def _inline_samples(config: dict[str, Any], fs: dict[str, Any]) -> bool:
    """Few-shot examples written into the config (``fewshot_config.samples``) and no split to draw from."""
    return (fs.get("split") or config.get("fewshot_split")) is None and fs.get("samples") is not None


_HF_URL = re.compile(r"hf://datasets/([^/@]+/[^/@]+)(?:@([^/]+))?/(.+)")


def _https_files(files: Any) -> Any:
    """``hf://datasets/org/name[@rev]/path`` data files as the https URLs they stand for
    (a manifest's builder ``data_files`` are http(s) URLs)."""
    if isinstance(files, dict):
        return {k: _https_files(v) for k, v in files.items()}
    if isinstance(files, list):
        return [_https_files(v) for v in files]
    if isinstance(files, str):
        match = _HF_URL.fullmatch(files)
        if match:
            repo, revision, path = match.groups()
            return f"https://huggingface.co/datasets/{repo}/resolve/{revision or 'main'}/{path}"
    return files


def _fewshot_runtime(config: dict[str, Any], fs: dict[str, Any], where: str) -> dict[str, Any]:
    """The effective fewshot_config (lm-eval's FewshotConfig.from_dict inheritance)."""
    if fs.get("process_docs") is not None and fs.get("process_docs") != config.get("process_docs"):
        raise LmEvalImportError(f"{where}: fewshot_config.process_docs differs from process_docs; not supported")
    out = {}
    for key, default in (("doc_to_text", None), ("doc_to_target", None), ("doc_to_choice", None),
                         ("gen_prefix", None), ("target_delimiter", " "), ("fewshot_delimiter", "\n\n")):
        value = fs.get(key)
        out[key] = value if value is not None else config.get(key, default)
    return out


def _fewshot(config: dict[str, Any], fs: dict[str, Any], count: int, test_split: str | None,
             dataset: dict[str, Any], paths: Mapping[str, str], where: str) -> dict[str, Any]:
    sampler = fs.get("sampler", "default")
    if sampler not in ("default", "first_n"):
        raise LmEvalImportError(f"{where}: fewshot_config.sampler {sampler!r} is not supported (default, first_n are)")
    if fs.get("fewshot_indices") is not None:
        raise LmEvalImportError(f"{where}: fewshot_config.fewshot_indices is not supported")
    split = fs.get("split") or config.get("fewshot_split")
    out: dict[str, Any] = {
        "count": count,
        "prompt_template": "{{lm_eval.shot_prompt}}",
        "target_template": "{{lm_eval.shot_target}}",
        "example_template": "{{prompt}}{{target}}",
        "separator": "",
        "strategy": "first" if sampler == "first_n" else "random",
        "seed": FEWSHOT_SEED,
    }
    if split is not None and split == test_split:
        return out  # the task's own rows; the evaluated row is left out, as lm-eval leaves it out
    pool = split or config.get("training_split") or config.get("validation_split") or test_split
    out["dataset"] = {k: v for k, v in dataset.items() if k != "max_rows"} | {"split": pool}
    return out


def _metrics(config: dict[str, Any], output_type: str, where: str) -> list[dict[str, Any]]:
    """The metric list, each checked: a metric lm-eval's ``process_results`` gives (or a
    ``!function`` metric, or any name a custom ``process_results`` returns) and an aggregation
    that takes what it gives (a number for a mean)."""
    from evalnb.suite.lm_eval_aggregations import AGGREGATIONS, PAIR_AGGREGATIONS

    listed = config.get("metric_list")
    metrics = [{"metric": m} for m in _DEFAULT_METRICS[output_type]] if listed is None else listed
    custom = config.get("process_results") is not None
    numbers, pairs = _NUMBER_METRICS[output_type], _PAIR_METRICS[output_type]
    out = []
    for metric in metrics:
        name = metric.get("metric") if isinstance(metric, dict) else None
        hooked = _is_hook(name) and output_type == "generate_until"
        if not (hooked or (isinstance(name, str) and (custom or name in numbers or name in pairs))):
            shown = name.get("function") if isinstance(name, dict) else name
            raise LmEvalImportError(f"{where}: metric {shown!r} is not supported for {output_type} "
                                    f"(supported: {', '.join(numbers + pairs)}, a !function metric for "
                                    "generate_until, or a custom process_results)")
        agg = _aggregation(metric)
        if not _is_hook(agg) and agg not in AGGREGATIONS:
            raise LmEvalImportError(f"{where}: metric {_shown(name)!r}: aggregation {agg!r} is not supported "
                                    f"({', '.join(AGGREGATIONS)} or a !function are)")
        if not custom and not hooked and not _is_hook(agg):
            takes_pairs = agg in PAIR_AGGREGATIONS or agg == "perplexity"
            if takes_pairs != (name in pairs):
                what = "a (gold, answer) pair" if name in pairs else "a number"
                raise LmEvalImportError(f"{where}: metric {name!r} gives {what} per doc, which aggregation "
                                        f"{agg!r} cannot take (lm-eval fails on it too)")
        out.append(dict(metric))
    return out


def _aggregation(metric: dict[str, Any]) -> Any:
    """The metric's aggregation: its own, else the one lm-eval registers for it, else ``mean``."""
    from evalnb.suite.lm_eval_aggregations import DEFAULT_AGGREGATION

    name = metric.get("metric")
    return metric.get("aggregation") or DEFAULT_AGGREGATION.get(name if isinstance(name, str) else "", "mean")


def _is_hook(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"function"} and isinstance(value["function"], str)


def _shown(name: Any) -> Any:
    return name.get("function") if isinstance(name, dict) else name


def _filters(config: dict[str, Any], output_type: str, where: str) -> list[dict[str, Any]]:
    if output_type != "generate_until":
        return []
    pipelines = config.get("filter_list") or [{"name": "none", "filter": [{"function": "take_first"}]}]
    for pipeline in pipelines:
        for step in pipeline.get("filter") or []:
            if step.get("function") not in _FILTERS:
                raise LmEvalImportError(f"{where}: filter_list {pipeline.get('name')!r}: filter "
                                        f"{step.get('function')!r} is not supported ({', '.join(_FILTERS)} are)")
    return pipelines


def _repeats(config: dict[str, Any], output_type: str, filters: list[dict[str, Any]], where: str) -> int:
    """lm-eval's ``repeats`` (answers per doc): a run's ``epochs``; only generation tasks repeat."""
    repeats = config.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= 100:
        raise LmEvalImportError(f"{where}: repeats must be an integer from 1 to 100 (evalnb's epochs), found {repeats!r}")
    if repeats > 1 and output_type != "generate_until":
        raise LmEvalImportError(f"{where}: repeats {repeats} is supported for generate_until tasks only")
    for pipeline in filters:
        for step in pipeline.get("filter") or []:
            k = step.get("k")
            if step.get("function") == "take_first_k" and (not isinstance(k, int) or not 1 <= k <= repeats):
                raise LmEvalImportError(f"{where}: filter_list {pipeline.get('name')!r}: take_first_k k={k!r} "
                                        f"must be from 1 to repeats ({repeats})")
    return repeats


def _metric_ids(metrics: list[dict[str, Any]], filters: list[dict[str, Any]], output_type: str) -> list[tuple[str, bool]]:
    from evalnb.suite.lm_eval_aggregations import LOWER_IS_BETTER

    ids = []
    for metric in metrics:
        name = metric["metric"]["function"].rpartition(".")[2] if _is_hook(metric["metric"]) else metric["metric"]
        better = bool(metric.get("higher_is_better", name not in LOWER_IS_BETTER))
        if output_type != "generate_until":
            ids.append((_ID.sub("_", name), better))
            continue
        for pipeline in filters:
            key = name if pipeline["name"] == "none" else f"{name}.{pipeline['name']}"
            ids.append((_ID.sub("_", key), better))
    return ids


def _runtime_source(runtime: dict[str, Any], modules: dict[str, str]) -> str:
    from evalnb.suite import lm_eval_hooks, lm_eval_runtime

    return _with_config(_sources(lm_eval_hooks, lm_eval_runtime), runtime, modules)


def _grader_source(config: dict[str, Any], modules: dict[str, str]) -> str:
    from evalnb.suite import lm_eval_aggregations, lm_eval_grading, lm_eval_hooks

    return _with_config(_sources(lm_eval_hooks, lm_eval_aggregations, lm_eval_grading), config, modules)


def _sources(*modules: Any) -> str:
    """The modules' sources one after the other, as one self-contained program."""
    return "\n\n".join(Path(m.__file__).read_text(encoding="utf-8").rstrip("\n") for m in modules)


def _with_config(source: str, config: dict[str, Any], modules: dict[str, str] | None) -> str:
    try:
        text = json.dumps(config, ensure_ascii=False, sort_keys=True)
    except TypeError as exc:
        raise LmEvalImportError(f"a task setting is not plain data: {exc}") from None
    lines = [source.rstrip("\n"), "", "", "# --- the task's settings, written by evalnb's lm-eval importer ---",
             f"CONFIG = __import__('json').loads({text!r})"]
    if modules is not None:
        lines.append(f"MODULES = {dict(sorted(modules.items()))!r}")
    return "\n".join(lines) + "\n"


def _lm_eval_version() -> str:
    try:
        from importlib.metadata import version

        return version("lm_eval")
    except Exception:  # noqa: BLE001 - not installed: importing from YAML paths still works
        return "unknown"
