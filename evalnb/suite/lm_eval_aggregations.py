"""lm-eval's aggregations (``lm_eval.api.metrics``, 0.4.x), ported for the sandbox.

Self-contained: its source is carried, before the grader's (`evalnb.suite.lm_eval_grading`),
into an imported lm-eval task's manifest. Each takes the list of per-doc values lm-eval's
``process_results`` gives a metric: numbers for ``mean``/``median``, ``(loglikelihood,
count)`` for the weighted perplexities, ``(gold, prediction)`` pairs for ``f1`` and
``matthews_corrcoef`` (scikit-learn, as lm-eval), ``(reference, prediction)`` pairs for the
corpus-level ``bleu``, ``chrf``, ``chrf++`` and ``ter`` (sacrebleu, as lm-eval), ``(gold,
probabilities)`` for ``brier_score`` (numpy). A task's ``!function`` aggregation is called
on the same list. sacrebleu and scikit-learn are imported only when a task uses them
(``pip install 'evalnb[lm-eval]'``).
"""

import math

# the aggregation lm-eval registers for each built-in metric (register_metric)
DEFAULT_AGGREGATION = {
    "acc": "mean", "acc_norm": "mean", "acc_bytes": "mean", "acc_mutual_info": "mean", "exact_match": "mean",
    "likelihood": "mean", "perplexity": "perplexity", "word_perplexity": "weighted_perplexity",
    "byte_perplexity": "weighted_perplexity", "bits_per_byte": "bits_per_byte", "mcc": "matthews_corrcoef",
    "f1": "f1", "bleu": "bleu", "chrf": "chrf", "chrf++": "chrf++", "ter": "ter", "brier_score": "brier_score",
}
LOWER_IS_BETTER = ("perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte", "ter", "brier_score")


def _mean(items):
    return sum(items) / len(items)


def _weighted_mean(items):
    a, b = zip(*items)
    return sum(a) / sum(b)


def _median(items):
    return sorted(items)[len(items) // 2]


def _nanmean(items):
    kept = [x for x in items if not (isinstance(x, float) and math.isnan(x))]
    return _mean(kept) if kept else float("nan")


def _f1(items):
    from sklearn.metrics import f1_score

    golds, preds = list(zip(*items))
    return float(max([f1_score(golds, preds)]))


def _mcc(items):
    from sklearn.metrics import matthews_corrcoef

    golds, preds = list(zip(*items))
    return float(matthews_corrcoef(golds, preds))


def _is_iterable(obj):
    return hasattr(obj, "__iter__") and not isinstance(obj, str)


def _sacreformat(refs, preds):
    """lm-eval's: refs as sacrebleu's streams (one list per reference position), preds as strings."""
    refs = list(refs)
    if not _is_iterable(refs[0]):
        refs = [[ref] for ref in refs]
    refs = list(zip(*refs))
    preds = list(preds)
    if _is_iterable(preds[0]):
        if len(preds[0]) != 1:
            raise ValueError(f"a prediction must be a string, found {preds[0]!r}")
        preds = [pred[0] for pred in preds]
    return refs, preds


def _sacrebleu(kind, items, **kwargs):
    import sacrebleu

    refs, preds = _sacreformat(*list(zip(*items))[:2])
    corpus = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf, "ter": sacrebleu.corpus_ter}[kind]
    return float(corpus(preds, refs, **kwargs).score)


def _brier(items):
    import numpy as np

    gold, predictions = list(zip(*items))
    _, num_class = np.array(predictions).shape
    one_hot = np.eye(num_class)[list(gold)]
    return float(np.mean(np.sum((np.array(predictions) - one_hot) ** 2, axis=1)))


AGGREGATIONS = {
    "mean": _mean, "median": _median, "nanmean": _nanmean,
    "perplexity": lambda items: math.exp(-_mean(items)),
    "weighted_perplexity": lambda items: math.exp(-_weighted_mean(items)),
    "bits_per_byte": lambda items: -_weighted_mean(items) / math.log(2),
    "f1": _f1, "matthews_corrcoef": _mcc, "brier_score": _brier,
    "bleu": lambda items: _sacrebleu("bleu", items),
    "chrf": lambda items: _sacrebleu("chrf", items),
    "chrf++": lambda items: _sacrebleu("chrf", items, word_order=2),
    "ter": lambda items: _sacrebleu("ter", items),
}
# aggregations that take (a, b) pairs rather than numbers
PAIR_AGGREGATIONS = ("weighted_perplexity", "bits_per_byte", "f1", "matthews_corrcoef", "brier_score", "bleu",
                     "chrf", "chrf++", "ter")


def aggregate(aggregation, items):
    """``aggregation`` (a name above, or a task's ``!function`` hook as a callable) over ``items``."""
    fn = aggregation if callable(aggregation) else AGGREGATIONS[aggregation]
    value = fn(items)
    return float(value) if hasattr(value, "__float__") else value
