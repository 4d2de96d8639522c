"""The grader an imported lm-eval task runs in the sandbox: lm-eval's filters and metrics, copied.

Self-contained (standard library only): its source is carried into the manifest by
`evalnb.suite.lm_eval_import`, followed by ``CONFIG`` (the task's output type, filter
pipelines and metrics). ``grade(sample, item)`` returns one score per (metric, pipeline):

- **multiple choice** (``acc``, ``acc_norm``): from ``sample["loglikelihoods"]`` (one summed
  log-probability per continuation; a run stores them as its output text, JSON); ``acc_norm`` divides by the length in characters of the
  choice without its delimiter; ties go to the first choice, as ``numpy.argmax`` does.
  A sample without log-likelihoods is not scored (``null``).
- **generation** (``exact_match`` with ``ignore_case``, ``ignore_punctuation``,
  ``ignore_numbers``, ``regexes_to_ignore``): each ``filter_list`` pipeline (``regex`` with
  ``group_select`` and ``fallback``, ``take_first``, ``remove_whitespace``, ``lowercase``,
  ``uppercase``, ``map``) runs on the output, then the metric compares it with the gold;
  a list of golds scores 1 when any matches. The score is named ``<metric>`` for lm-eval's
  default pipeline and ``<metric>.<pipeline>`` otherwise (``exact_match.strict-match``).
- **log-likelihood** and **rolling** tasks: ``grade_batch(samples)`` (a batch grader) gives each
  sample ``acc`` (the continuation was greedy) and the task ``perplexity`` (exp of minus the
  mean log-likelihood), or ``word_perplexity``/``byte_perplexity`` (exp of minus the summed
  log-likelihood over the words / UTF-8 bytes of the targets) and ``bits_per_byte``, as
  lm-eval aggregates them.
"""

import json
import math
import re
import string

CONFIG = {}  # replaced by the importer


def _regex_filter(resp, regex_pattern=r"#### (\-?[0-9\.\,]+)", group_select=0, fallback="[invalid]"):
    if not isinstance(resp, str):
        resp = ""
    match = re.findall(regex_pattern, resp)
    if not match:
        return fallback
    match = match[group_select]
    if isinstance(match, tuple):
        match = [m for m in match if m]
        match = match[0] if match else fallback
    return match.strip()


def _apply(step, resp):
    name = step["function"]
    kwargs = {k: v for k, v in step.items() if k != "function"}
    if name == "regex":
        return _regex_filter(resp, **kwargs)
    if name == "take_first":
        return resp
    if name == "remove_whitespace":
        return resp.strip()
    if name == "lowercase":
        return resp.lower()
    if name == "uppercase":
        return resp.upper()
    if name == "map":
        return (kwargs.get("mapping_dict") or {}).get(resp, kwargs.get("default_value"))
    raise ValueError(f"filter {name!r} is not supported")


def exact_match(prediction, reference, regexes_to_ignore=None, ignore_case=False,
                ignore_punctuation=False, ignore_numbers=False):
    """lm-eval's exact_match (its copy of Hugging Face evaluate's) for one pair: 1.0 or 0.0."""
    for pattern in regexes_to_ignore or ():
        prediction = re.sub(pattern, "", prediction)
        reference = re.sub(pattern, "", reference)
    if ignore_case:
        prediction, reference = prediction.lower(), reference.lower()
    if ignore_punctuation:
        table = str.maketrans("", "", string.punctuation)
        prediction, reference = prediction.translate(table), reference.translate(table)
    if ignore_numbers:
        table = str.maketrans("", "", string.digits)
        prediction, reference = prediction.translate(table), reference.translate(table)
    # numpy's fixed-width strings (what lm-eval compares) drop trailing NULs
    return 1.0 if prediction.rstrip("\x00") == reference.rstrip("\x00") else 0.0


def _argmax(values):
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def _scored(sample):
    """(loglikelihoods, is_greedy) from the sample, or from the reply evalnb's runner stores as
    the output text (JSON with those two lists)."""
    if sample.get("loglikelihoods") is not None:
        return sample["loglikelihoods"], sample.get("is_greedy")
    try:
        reply = json.loads(sample.get("output_text") or "")
    except ValueError:
        return None, None
    if not isinstance(reply, dict):
        return None, None
    return reply.get("loglikelihoods"), reply.get("is_greedy")


def _choice_scores(sample, item):
    lls, greedy = _scored(sample)
    names = [m["metric"] for m in CONFIG["metrics"]]
    if not lls:
        return {name: None for name in names}
    lm = item["lm_eval"]
    choices = lm["choices"]
    gold = lm.get("gold_index", int(item["target"]))
    pred = _argmax(lls)
    pred_norm = _argmax([ll / max(len(c), 1) for ll, c in zip(lls, choices)])
    pred_bytes = _argmax([ll / max(len(c.encode("utf-8")), 1) for ll, c in zip(lls, choices)])
    golds = gold if isinstance(gold, list) else [gold]
    greedy = greedy or [False] * len(lls)
    values = {
        "acc": 1.0 if pred in golds else 0.0,
        "acc_norm": 1.0 if pred_norm in golds else 0.0,
        "acc_bytes": 1.0 if pred_bytes in golds else 0.0,
        "exact_match": float(any(greedy[g] for g in golds if 0 <= g < len(greedy))),
    }
    return {name: values[name] for name in names}


def _generation_scores(sample, item):
    gold = item["lm_eval"].get("gold", item["target"])
    golds = [str(g) for g in gold] if isinstance(gold, list) else [str(gold)]
    scores = {}
    for pipeline in CONFIG["filters"]:
        resp = sample.get("output_text") or ""
        for step in pipeline["filter"]:
            resp = _apply(step, resp)
        resp = "" if resp is None else str(resp)
        for metric in CONFIG["metrics"]:
            name = metric["metric"]
            kwargs = {k: v for k, v in metric.items() if k not in ("metric", "aggregation", "higher_is_better")}
            value = max(exact_match(resp, g, **kwargs) for g in golds)
            key = name if pipeline["name"] == "none" else f"{name}.{pipeline['name']}"
            scores[key] = value
    return scores


def grade(sample, item):
    if CONFIG["output_type"] == "multiple_choice":
        return {"scores": _choice_scores(sample, item)}
    return {"scores": _generation_scores(sample, item)}


def grade_batch(samples):
    names = [m["metric"] for m in CONFIG["metrics"]]
    per_sample, lls, words, nbytes = [], [], 0, 0
    for sample in samples:
        values, greedy = _scored(sample)
        if not values:
            per_sample.append({"scores": {"acc": None}} if "acc" in names else None)
            continue
        lls.append(float(values[0]))
        if CONFIG["output_type"] == "loglikelihood_rolling":
            target = (sample.get("item") or {}).get("target") or ""
            words += len(re.split(r"\s+", target))
            nbytes += len(target.encode("utf-8"))
        if "acc" in names:
            per_sample.append({"scores": {"acc": 1.0 if greedy and greedy[0] else 0.0}})
        else:
            per_sample.append(None)
    metrics = {}
    if lls:
        total = sum(lls)
        if "perplexity" in names:
            metrics["perplexity"] = math.exp(-total / len(lls))
        if "word_perplexity" in names and words:
            metrics["word_perplexity"] = math.exp(-total / words)
        if "byte_perplexity" in names and nbytes:
            metrics["byte_perplexity"] = math.exp(-total / nbytes)
        if "bits_per_byte" in names and nbytes:
            metrics["bits_per_byte"] = -total / nbytes / math.log(2)
    out = {"metrics": metrics}
    if "acc" in names:
        out["samples"] = per_sample
    return out
