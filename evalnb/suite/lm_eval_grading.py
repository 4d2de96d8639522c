"""The grader an imported lm-eval task runs in the sandbox: lm-eval's filters and metrics, copied.

Self-contained (standard library) but for `evalnb.suite.lm_eval_hooks` and
`evalnb.suite.lm_eval_aggregations`, whose sources are put before it: all three are carried
into the manifest by `evalnb.suite.lm_eval_import`, followed by ``CONFIG`` (the task's output
type, filter pipelines, metrics and ``process_results``) and ``MODULES``.

- **multiple choice**: from ``sample["loglikelihoods"]`` (one summed log-probability per
  continuation; a run stores them as its output text, JSON): ``acc``, ``acc_norm`` (divided by
  the length in characters of the choice without its delimiter), ``acc_bytes``,
  ``exact_match``; ties go to the first choice, as ``numpy.argmax`` does; ``f1``/``mcc`` get
  ``(gold, prediction)``, ``brier_score`` ``(gold, softmax)``, ``likelihood`` ``(gold, lls)``.
  A sample without log-likelihoods is not scored (``null``).
- **generation**: each ``filter_list`` pipeline (``regex`` with ``group_select`` and
  ``fallback``, ``multi_choice_regex``, ``take_first``, ``take_first_k``, ``majority_vote``,
  ``remove_whitespace``, ``lowercase``, ``uppercase``, ``map``) runs on the doc's answers as
  lm-eval's filters do, then each metric: ``exact_match`` (``ignore_case``,
  ``ignore_punctuation``, ``ignore_numbers``, ``regexes_to_ignore``; a list of golds scores 1
  when any matches), a ``!function`` metric, or a pass-through metric's ``(gold, prediction)``
  (``bleu``, ``chrf``, ``ter``, ``f1``...). The score is named ``<metric>`` for lm-eval's
  default pipeline and ``<metric>.<pipeline>`` otherwise (``exact_match.strict-match``;
  characters a metric id cannot hold become ``_``: ``exact_match.maj_64``). A task with
  ``repeats: N`` is graded by ``grade_batch``: an item's first N epochs are its N answers.
- **log-likelihood** and **rolling** tasks: ``acc`` (the continuation was greedy) and
  ``perplexity``, or ``word_perplexity``/``byte_perplexity``/``bits_per_byte``.
- A custom ``process_results`` (a ``!function`` hook) gives a doc's values instead.

``grade`` serves tasks whose metrics are all means of numbers; ``grade_batch`` the others: it
aggregates each metric over the task as lm-eval does (corpus-level ``bleu``, ``f1``, a
``!function`` aggregation...), and leaves means to evalnb as per-sample scores.
"""

import json
import math
import re
import string
from collections import Counter

if "aggregate" not in globals():  # imported as a module; in a manifest the sources below come first
    from evalnb.suite.lm_eval_aggregations import DEFAULT_AGGREGATION, aggregate
    from evalnb.suite.lm_eval_hooks import hook

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


_PUNCT_TABLE = None  # every Unicode punctuation code point (built on first use: it takes a moment)


def _punct_table():
    global _PUNCT_TABLE
    if _PUNCT_TABLE is None:
        import sys
        import unicodedata

        _PUNCT_TABLE = dict.fromkeys(i for i in range(sys.maxunicode)
                                     if unicodedata.category(chr(i)).startswith("P"))
    return _PUNCT_TABLE


def _multi_choice_filter(resps, doc, regex_pattern=r"#### (\-?[0-9\.\,]+)", group_select=0,
                         fallback="[invalid]", ignore_case=False, ignore_punctuation=False,
                         regexes_to_ignore=None):
    """lm-eval's MultiChoiceRegexFilter on one doc's responses: the regex; else a choice's text
    (as ``(A)``, ``(B)``...); else ``: A`` style letters; else ``fallback``."""
    regex = re.compile(regex_pattern)

    def find_match(regex, resp, convert_dict=None):
        if convert_dict is None:
            convert_dict = {}
        if not isinstance(resp, str):
            resp = ""
        match = regex.findall(resp)
        if match:
            match = match[group_select]
            if isinstance(match, tuple):
                non_empty = [m for m in match if m]
                if not non_empty:
                    return ""
                match = non_empty[0]
            match = match.strip()
            if match and match in convert_dict:
                match = convert_dict[match]
        return match

    def filter_ignores(st):
        if regexes_to_ignore is not None:
            for s in regexes_to_ignore:
                st = re.sub(s, "", st)
        if ignore_case:
            st = st.lower()
        if ignore_punctuation:
            st = st.translate(_punct_table())
        return st

    fallback_regexes, choice_to_alpha, next_alpha = [], {}, "A"
    without_paren_fallback_regexes, without_paren_to_target = [], {}
    if "choices" not in doc:
        raise ValueError("multi_choice_regex reads the doc's 'choices' field, and this item has none")
    for c in doc["choices"]:
        m = filter_ignores(c.strip())
        fallback_regexes.append(f"{re.escape(m)}")
        choice_to_alpha[m] = f"({next_alpha})"
        without_paren_fallback_regexes.append(next_alpha)
        without_paren_to_target[next_alpha] = f"({next_alpha})"
        next_alpha = chr(ord(next_alpha) + 1)
    # longest first: a choice that is a prefix of another must not shadow it (lm-eval does the same)
    fallback_regex = re.compile("|".join(sorted(fallback_regexes, key=len, reverse=True)))
    without_paren_fallback_regex = re.compile(rf":[\s]*({'|'.join(without_paren_fallback_regexes)})")
    filtered = []
    for resp in resps:
        match = find_match(regex, resp)
        if not match:
            match = find_match(fallback_regex, filter_ignores(resp), choice_to_alpha)
            if not match:
                match = find_match(without_paren_fallback_regex, resp, without_paren_to_target)
        if not match:
            match = fallback
        filtered.append(match)
    return filtered


def _majority(resps):
    """lm-eval's MajorityVoteFilter: the most common response (ties: the one seen first)."""
    return [Counter(resps).most_common(1)[0][0]]


def _each(fn, resps):
    """A filter that maps each response: over the doc's list, or on the one left after take_first."""
    return [fn(r) for r in resps] if isinstance(resps, list) else fn(resps)


def _apply(step, resps, doc):
    """One lm-eval filter on one doc's responses (a list; a single value after ``take_first``)."""
    name = step["function"]
    kwargs = {k: v for k, v in step.items() if k != "function"}
    if name == "regex":
        return _each(lambda r: _regex_filter(r, **kwargs), resps)
    if name == "multi_choice_regex":
        return _multi_choice_filter(resps if isinstance(resps, list) else [resps], doc, **kwargs)
    if name == "take_first":
        return resps[0] if isinstance(resps, list) else resps
    if name == "take_first_k":
        if len(resps) < kwargs["k"]:
            raise ValueError(f"take_first_k needs {kwargs['k']} answers per item, found {len(resps)}")
        return resps[: kwargs["k"]]
    if name == "majority_vote":
        return _majority(resps if isinstance(resps, list) else [resps])
    if name == "remove_whitespace":
        return _each(lambda r: r.strip(), resps)
    if name == "lowercase":
        return _each(lambda r: r.lower(), resps)
    if name == "uppercase":
        return _each(lambda r: r.upper(), resps)
    if name == "map":
        mapping, default = kwargs.get("mapping_dict") or {}, kwargs.get("default_value")
        return _each(lambda r: mapping.get(r, default), resps)
    raise ValueError(f"filter {name!r} is not supported")


def run_pipeline(steps, resps, doc):
    """lm-eval's FilterEnsemble for one doc: ``resps`` (its answers, in order) through each step;
    the prediction is what is left (the first one if a list is left)."""
    for step in steps:
        resps = _apply(step, resps, doc)
    if isinstance(resps, list):
        resps = resps[0] if resps else ""
    return resps


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


def _metric_name(metric):
    """A metric's key in lm-eval's results: its name, or a ``!function`` metric's function name."""
    name = metric["metric"]
    return name["function"].rpartition(".")[2] if isinstance(name, dict) else name


def _kwargs(metric):
    return {k: v for k, v in metric.items() if k not in ("metric", "aggregation", "higher_is_better")}


def _softmax(values):
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _choice_results(lls, greedy, item):
    """lm-eval's multiple_choice ``process_results`` for one doc (every metric it knows)."""
    lm = item["lm_eval"]
    choices = lm["choices"]
    gold = lm.get("gold_index", int(item["target"]))
    pred = _argmax(lls)
    pred_norm = _argmax([ll / max(len(c), 1) for ll, c in zip(lls, choices)])
    pred_bytes = _argmax([ll / max(len(c.encode("utf-8")), 1) for ll, c in zip(lls, choices)])
    golds = gold if isinstance(gold, list) else [gold]
    greedy = greedy or [False] * len(lls)
    return {
        "acc": 1.0 if pred in golds else 0.0,
        "acc_norm": 1.0 if pred_norm in golds else 0.0,
        "acc_bytes": 1.0 if pred_bytes in golds else 0.0,
        "exact_match": float(any(greedy[g] for g in golds if 0 <= g < len(greedy))),
        "f1": (gold, pred), "mcc": (gold, pred),
        "brier_score": (gold, _softmax(lls)), "likelihood": (gold, list(lls)),
    }


def _choice_scores(sample, item):
    lls, greedy = _scored(sample)
    names = [m["metric"] for m in CONFIG["metrics"]]
    if not lls:
        return {name: None for name in names}
    values = _choice_results(lls, greedy, item)
    return {name: values[name] for name in names}


def _generation_value(metric, resp, gold):
    """One generation metric for one doc, as lm-eval's ``process_results`` computes it: exact_match
    (a list of golds: any matches), a ``!function`` metric, else a registered pass-through
    metric's ``(gold, prediction)`` pair (several golds: 1.0 if any, as lm-eval does)."""
    name, kwargs = metric["metric"], _kwargs(metric)
    golds = [str(g) for g in gold] if isinstance(gold, list) else [str(gold)]
    if name == "exact_match":
        return max(exact_match(resp, g, **kwargs) for g in golds)
    fn = hook(name) if isinstance(name, dict) else None
    values = []
    for g in golds if isinstance(gold, list) else [gold if isinstance(gold, str) else str(gold)]:
        if fn is None:
            values.append([g, resp])
            continue
        try:
            value = fn(references=[g], predictions=[resp], **kwargs)
        except TypeError:
            value = fn([g, resp])
        values.append(value[_metric_name(metric)] if isinstance(value, dict) else value)
    if isinstance(gold, list):
        return 1.0 if any(values) else 0.0
    return values[0]


def _doc_scores(resps, item):
    """One doc's values from its answers (``resps``, in order), per (metric, pipeline): a number
    for a mean, else what the metric's aggregation takes."""
    gold = item["lm_eval"].get("gold", item["target"])
    doc = item.get("row") or item
    scores = {}
    for pipeline in CONFIG["filters"]:
        resp = run_pipeline(pipeline["filter"], list(resps), doc)
        resp = "" if resp is None else str(resp)
        keys = _doc_keys(pipeline)
        if CONFIG.get("process_results") is not None:
            found = hook(CONFIG["process_results"])(_lm_eval_doc(item), [resp])
            scores.update({key: found.get(_metric_name(m)) for m, key in zip(CONFIG["metrics"], keys)})
            continue
        for metric, key in zip(CONFIG["metrics"], keys):
            scores[key] = _generation_value(metric, resp, gold)
    return scores


def _generation_scores(sample, item):
    return _doc_scores([sample.get("output_text") or ""], item)


def _lm_eval_doc(item):
    """The doc lm-eval's ``process_results`` gets: the row after ``process_docs``, as lm-eval has it."""
    row = item.get("row") or {}
    return {k: v for k, v in row.items() if k != "lm_eval"}


def _loglikelihood_results(lls, greedy, item):
    """One doc's values for a log-likelihood, rolling or multiple-choice task (a custom
    ``process_results`` when the task has one)."""
    kind = CONFIG["output_type"]
    custom = CONFIG.get("process_results")
    if kind == "multiple_choice":
        if custom is not None:
            return hook(custom)(_lm_eval_doc(item), list(zip(lls, greedy or [False] * len(lls))))
        return _choice_results(lls, greedy, item)
    ll = float(lls[0])
    if kind == "loglikelihood":
        if custom is not None:
            return hook(custom)(_lm_eval_doc(item), [(ll, bool(greedy and greedy[0]))])
        return {"perplexity": ll, "acc": 1.0 if greedy and greedy[0] else 0.0}
    if custom is not None:
        return hook(custom)(_lm_eval_doc(item), [ll])
    target = item.get("target") or ""
    words, nbytes = len(re.split(r"\s+", target)), len(target.encode("utf-8"))
    return {"word_perplexity": (ll, words), "byte_perplexity": (ll, nbytes), "bits_per_byte": (ll, nbytes)}


def _repeated_scores(samples):
    """``repeats`` > 1: each item's first ``repeats`` epochs are lm-eval's answers for its doc; the
    doc's scores go on each of those samples (so the mean over epochs is lm-eval's score). An
    item with fewer answers (a failed epoch) and any epoch past ``repeats`` are not scored."""
    repeats = CONFIG["repeats"]
    by_item = {}
    for position, sample in enumerate(samples):
        by_item.setdefault(sample.get("sample_index"), []).append(position)
    out = [None] * len(samples)
    most = 0
    for positions in by_item.values():
        positions.sort(key=lambda p: samples[p].get("epoch") or 0)
        most = max(most, len(positions))
        used = positions[:repeats]
        if len(used) < repeats:
            continue
        scores = _doc_scores([samples[p].get("output_text") or "" for p in used], samples[used[0]]["item"])
        for p in used:
            out[p] = {"scores": scores}
    if most < repeats:
        raise ValueError(f"lm-eval task {CONFIG.get('task')!r} has repeats: {repeats}, so each item needs "
                         f"{repeats} answers; run it with evalnb.run(..., epochs={repeats}) "
                         f"(found at most {most} per item)")
    names = [key for pipeline in CONFIG["filters"] for key in _doc_keys(pipeline)]
    return [entry or {"scores": dict.fromkeys(names)} for entry in out]


def _doc_keys(pipeline):
    keys = []
    for metric in CONFIG["metrics"]:
        name = _metric_name(metric)
        key = name if pipeline["name"] == "none" else f"{name}.{pipeline['name']}"
        keys.append(re.sub(r"[^A-Za-z0-9_.\-]", "_", key))
    return keys


def _keys():
    """(metric, its key) for every value a doc gets (generation: per pipeline)."""
    if CONFIG["output_type"] != "generate_until":
        return [(m, re.sub(r"[^A-Za-z0-9_.\-]", "_", _metric_name(m))) for m in CONFIG["metrics"]]
    return [pair for pipeline in CONFIG["filters"] for pair in zip(CONFIG["metrics"], _doc_keys(pipeline))]


def _aggregation(metric):
    agg = metric.get("aggregation") or DEFAULT_AGGREGATION.get(_metric_name(metric), "mean")
    return hook(agg) if isinstance(agg, dict) else agg


def grade(sample, item):
    if CONFIG["output_type"] == "multiple_choice":
        return {"scores": _choice_scores(sample, item)}
    return {"scores": _generation_scores(sample, item)}


def grade_batch(samples):
    """Every sample's values, then each metric aggregated over the task as lm-eval aggregates
    it: a ``mean`` of numbers is left to evalnb (per-sample scores, so intervals and paired
    tests apply); every other aggregation is reported for the task."""
    if CONFIG["output_type"] == "generate_until" and CONFIG.get("repeats", 1) > 1:
        return {"samples": _repeated_scores(samples)}
    keys = _keys()
    values = []
    for sample in samples:
        item = sample.get("item") or {}
        if CONFIG["output_type"] == "generate_until":
            values.append(_generation_scores(sample, item))
            continue
        lls, greedy = _scored(sample)
        values.append(_loglikelihood_results(lls, greedy, item) if lls else None)
    per_sample, metrics = [None] * len(samples), {}
    for metric, key in keys:
        agg = _aggregation(metric)
        name = key if CONFIG["output_type"] == "generate_until" else _metric_name(metric)
        found = [v.get(name) for v in values if v is not None and v.get(name) is not None]
        if agg == "mean":  # evalnb's own mean over the per-sample scores
            for i, v in enumerate(values):
                value = None if v is None else v.get(name)
                entry = per_sample[i] = per_sample[i] or {"scores": {}}
                entry["scores"][key] = float(value) if value is not None else None
        elif found:
            metrics[key] = aggregate(agg, found)
    empty = {"scores": {key: None for metric, key in keys if _aggregation(metric) == "mean"}}
    out = {"metrics": metrics}
    if any(entry is not None for entry in per_sample):
        out["samples"] = [entry or empty for entry in per_sample]
    return out
