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
  ``group_select`` and ``fallback``, ``multi_choice_regex``, ``take_first``, ``take_first_k``,
  ``majority_vote``, ``remove_whitespace``, ``lowercase``, ``uppercase``, ``map``) runs on the
  doc's answers as lm-eval's filters do, then the metric compares what is left with the gold;
  a list of golds scores 1 when any matches. The score is named ``<metric>`` for lm-eval's
  default pipeline and ``<metric>.<pipeline>`` otherwise (``exact_match.strict-match``;
  characters a metric id cannot hold become ``_``: ``exact_match.maj_64``). A task with
  ``repeats: N`` is graded by ``grade_batch``: an item's first N epochs are its N answers.
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
from collections import Counter

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


def _doc_scores(resps, item):
    """One doc's scores from its answers (``resps``, in order), per (metric, pipeline)."""
    gold = item["lm_eval"].get("gold", item["target"])
    golds = [str(g) for g in gold] if isinstance(gold, list) else [str(gold)]
    doc = item.get("row") or item
    scores = {}
    for pipeline in CONFIG["filters"]:
        resp = run_pipeline(pipeline["filter"], list(resps), doc)
        resp = "" if resp is None else str(resp)
        for metric, key in zip(CONFIG["metrics"], _doc_keys(pipeline)):
            kwargs = {k: v for k, v in metric.items() if k not in ("metric", "aggregation", "higher_is_better")}
            scores[key] = max(exact_match(resp, g, **kwargs) for g in golds)
    return scores


def _generation_scores(sample, item):
    return _doc_scores([sample.get("output_text") or ""], item)


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
        key = metric["metric"] if pipeline["name"] == "none" else f"{metric['metric']}.{pipeline['name']}"
        keys.append(re.sub(r"[^A-Za-z0-9_.\-]", "_", key))
    return keys


def grade(sample, item):
    if CONFIG["output_type"] == "multiple_choice":
        return {"scores": _choice_scores(sample, item)}
    return {"scores": _generation_scores(sample, item)}


def grade_batch(samples):
    if CONFIG["output_type"] == "generate_until":
        return {"samples": _repeated_scores(samples)}
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
