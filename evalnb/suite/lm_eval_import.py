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
  else ``validation_split``.
- **Few-shot**: ``num_fewshot`` (the argument wins); the pool is lm-eval's (``fewshot_split``,
  else the training, validation, then test split); ``first_n`` -> ``strategy: first`` (the
  same examples as lm-eval); the default sampler -> ``strategy: random, seed: 1234``: distinct
  examples per row, deterministic, rendered as lm-eval renders them, but not the ones lm-eval
  draws (it runs one ``Random(1234)`` through the docs in order). The evaluated doc is left
  out of the pool only when lm-eval leaves it out (``fewshot_split == test_split``). Examples
  written into the config (``fewshot_config.samples``, a list or a ``!function``) are rendered
  by the preprocessor and put, with the description, before the question (``first_n``: the
  same block for every row, exactly lm-eval's; default sampler: a deterministic draw per row).
- **Scoring**: ``multiple_choice`` -> ``loglikelihood: {type: multiple_choice}`` with
  ``acc``/``acc_norm``/``acc_bytes``/``exact_match``; ``generate_until`` -> a ``qa`` task whose
  grader runs each ``filter_list`` pipeline and ``exact_match``, with ``generation_kwargs`` as
  the task's own ``generation`` block. ``repeats: N`` (self-consistency, ``majority_vote``)
  -> a batch grader over each item's first N epochs; evalnb has no per-task epochs, so the
  import warns to run with ``epochs=N`` and the grader says so when items lack answers.

What does not map raises `LmEvalImportError` naming the task and the field: Python class
tasks, ``custom_dataset``, promptsource ``use_prompt``, images/audio, multiple-input tasks,
samplers other than ``default``/``first_n``, and metrics or
filters the grader does not implement.
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
_CHOICE_METRICS = ("acc", "acc_norm", "acc_bytes", "exact_match")
_GENERATION_METRICS = ("exact_match",)
_ALLOWED_METRICS = {"multiple_choice": _CHOICE_METRICS, "generate_until": _GENERATION_METRICS,
                    "loglikelihood": ("perplexity", "acc"),
                    "loglikelihood_rolling": ("word_perplexity", "byte_perplexity", "bits_per_byte")}
# aggregations other than a mean over samples: the batch grader computes them over the task
_TASK_AGGREGATIONS = {"perplexity": "perplexity", "word_perplexity": "weighted_perplexity",
                      "byte_perplexity": "weighted_perplexity", "bits_per_byte": "bits_per_byte"}
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
    """A manifest dict with one task per lm-eval task (groups and tags expanded). ``include:`` and
    ``!function`` files stay in each task's folder unless ``allow_paths_outside=True``."""
    from evalnb.suite.lm_eval_registry import resolve_tasks

    specs = resolve_tasks(tasks, allow_paths_outside=allow_paths_outside)
    if not specs:
        raise LmEvalImportError(f"{tasks!r} names no lm-eval task")
    paths = {str(k): str(v) for k, v in (dataset_paths or {}).items()}
    return {
        "tasks": [import_task(s.name, s.config, s.modules, num_fewshot=num_fewshot, dataset_paths=paths,
                              limit_rows=limit_rows) for s in specs],
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
    """One lm-eval task config (includes merged, hooks as ``{"function": ref}``) -> an evalnb task."""
    where = f"lm-eval task {name!r}"
    for key, what in _UNSUPPORTED.items():
        if config.get(key) is not None:
            raise LmEvalImportError(f"{where}: {key}: {what} do not map to evalnb")
    output_type = config.get("output_type", "generate_until")
    if output_type not in _OUTPUT_TYPES:
        raise LmEvalImportError(f"{where}: output_type {output_type!r} is not one of {', '.join(_OUTPUT_TYPES)}")
    if isinstance(config.get("doc_to_text"), int):
        raise LmEvalImportError(f"{where}: doc_to_text is a choice index (a multiple-input task); not supported")
    if config.get("dataset_path") is None:
        raise LmEvalImportError(f"{where}: dataset_path is missing")
    if config.get("process_results") is not None:
        raise LmEvalImportError(f"{where}: process_results (a custom scorer) is not supported yet")

    count = num_fewshot if num_fewshot is not None else (config.get("num_fewshot") or 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise LmEvalImportError(f"{where}: num_fewshot must be a non-negative integer (found {count!r})")
    fewshot_cfg = config.get("fewshot_config") or {}
    test_split = config.get("test_split")
    eval_split = test_split or config.get("validation_split")
    if eval_split is None:
        raise LmEvalImportError(f"{where}: neither test_split nor validation_split is set")

    dataset = _dataset(config, eval_split, dataset_paths or {}, limit_rows)
    runtime = {key: config.get(key) for key in ("doc_to_text", "doc_to_target", "doc_to_choice",
                                                  "gen_prefix", "process_docs")}
    runtime.update(output_type=output_type, description=config.get("description") or "",
                   target_delimiter=config.get("target_delimiter", " "),
                   fewshot_delimiter=config.get("fewshot_delimiter", "\n\n"))
    task: dict[str, Any] = {
        "id": _ID.sub("_", name),
        "name": config.get("task_alias") or name,
        "type": _TASK_TYPE[output_type],
        "dataset": dataset,
        "prompt_template": "{{lm_eval.prompt}}",
        "target_template": "{{lm_eval.target}}",
    }
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
        task["fewshot"] = _fewshot(config, fewshot_cfg, count, test_split, dataset, dataset_paths or {}, where)
    metrics = _metrics(config, output_type, where)
    filters = _filters(config, output_type, where)
    repeats = _repeats(config, output_type, filters, where)
    task["preprocess"] = {"type": "python", "contract": "batch", "source": _runtime_source(runtime, modules)}
    contract = "batch" if output_type in ("loglikelihood", "loglikelihood_rolling") or repeats > 1 else "sample"
    task["grader"] = {"type": "python", "contract": contract,
                      "source": _grader_source(output_type, metrics, filters, name=name, repeats=repeats)}
    task["metrics"] = [{"id": metric_id, "higher_is_better": better} for metric_id, better in
                       _metric_ids(metrics, filters, output_type)]
    if output_type == "multiple_choice":
        task["loglikelihood"] = {"type": "multiple_choice", "continuations": "lm_eval.continuations"}
    elif output_type == "loglikelihood":
        task["loglikelihood"] = {"type": "loglikelihood", "continuations": "lm_eval.continuations"}
    elif output_type == "loglikelihood_rolling":
        task["loglikelihood"] = {"type": "loglikelihood_rolling"}
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


_GENERATION_KEYS = {"until": "until", "max_gen_toks": "max_gen_toks", "temperature": "temperature",
                    "top_p": "top_p", "top_k": "top_k", "do_sample": "do_sample"}


def _generation(config: dict[str, Any], where: str) -> dict[str, Any]:
    """``generation_kwargs`` as the task's generation block (lm-eval's defaults when absent:
    greedy, stop at the few-shot delimiter, 256 tokens)."""
    kwargs = config.get("generation_kwargs")
    if kwargs is None:
        kwargs = {"until": [config.get("fewshot_delimiter", "\n\n")], "do_sample": False, "temperature": 0.0,
                  "max_gen_toks": 256}
    unknown = sorted(set(kwargs) - _GENERATION_KEYS.keys())
    if unknown:
        raise LmEvalImportError(f"{where}: generation_kwargs {', '.join(unknown)} not supported "
                                f"({', '.join(_GENERATION_KEYS)} are)")
    out = {key: kwargs[key] for key in _GENERATION_KEYS if kwargs.get(key) is not None}
    if "until" not in out:
        out["until"] = [config.get("fewshot_delimiter", "\n\n")]  # lm-eval's TaskConfig default
    if "temperature" in out:
        out["temperature"] = float(out["temperature"])
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
    listed = config.get("metric_list")
    metrics = [{"metric": m} for m in _DEFAULT_METRICS[output_type]] if listed is None else listed
    allowed = _ALLOWED_METRICS[output_type]
    out = []
    for metric in metrics:
        name = metric.get("metric")
        if not isinstance(name, str) or name not in allowed:
            shown = name.get("function") if isinstance(name, dict) else name
            raise LmEvalImportError(f"{where}: metric {shown!r} is not supported for {output_type} "
                                    f"(supported: {', '.join(allowed)})")
        if metric.get("aggregation", _TASK_AGGREGATIONS.get(name, "mean")) != _TASK_AGGREGATIONS.get(name, "mean"):
            raise LmEvalImportError(f"{where}: metric {name!r}: aggregation {metric['aggregation']!r} is not supported")
        out.append(dict(metric))
    return out


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
    ids = []
    for metric in metrics:
        better = bool(metric.get("higher_is_better", metric["metric"] not in _TASK_AGGREGATIONS))
        if output_type != "generate_until":
            ids.append((metric["metric"], better))
            continue
        for pipeline in filters:
            name = metric["metric"] if pipeline["name"] == "none" else f"{metric['metric']}.{pipeline['name']}"
            ids.append((_ID.sub("_", name), better))
    return ids


def _runtime_source(runtime: dict[str, Any], modules: dict[str, str]) -> str:
    from evalnb.suite import lm_eval_runtime

    return _with_config(Path(lm_eval_runtime.__file__).read_text(encoding="utf-8"), runtime, modules)


def _grader_source(output_type: str, metrics: list[dict[str, Any]], filters: list[dict[str, Any]], *,
                   name: str, repeats: int) -> str:
    from evalnb.suite import lm_eval_grading

    config = {"output_type": output_type, "metrics": metrics, "filters": filters, "task": name, "repeats": repeats}
    return _with_config(Path(lm_eval_grading.__file__).read_text(encoding="utf-8"), config, None)


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
