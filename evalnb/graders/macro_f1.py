"""Macro F1 over labels (a batch grader): the unweighted mean of per-class F1.

``grade_batch`` sees every sample of one task and one model. Classes are the labels that occur
among the targets (``item["target"]``, else ``sample["target"]``), plus ``LABELS`` when set
(a declared label that is predicted but never a target scores F1 0; one never seen is skipped).
A prediction (``extracted_output``) outside the classes, or ``None``, counts as a miss for the
gold class but adds no class of its own, so junk text cannot create zero-F1 classes that drag
the average down. Per class ``F1 = 2·TP / (2·TP + FP + FN)``. Labels compare case-insensitively
with surrounding whitespace ignored (set ``CASE_SENSITIVE = True`` to change that).

Returns ``{"metrics": {"macro_f1": x}}`` (task-level; no per-sample scores) and raises
ValueError when there are no samples. Use with ``output_extraction: {"type": "label_set"}`` so
predictions are canonical labels.
Manifest: ``{"type": "python", "contract": "batch", "metric_id": "macro_f1", "source": ...}``.
"""

LABELS = ()
CASE_SENSITIVE = False


def _key(label):
    if label is None:
        return None
    text = str(label).strip()
    return text if CASE_SENSITIVE else text.casefold()


def macro_f1(golds, predictions):
    classes = {_key(label) for label in LABELS} | set(golds)
    counts = {label: [0, 0, 0] for label in classes}  # tp, fp, fn
    for gold, predicted in zip(golds, predictions):
        if predicted == gold:
            counts[gold][0] += 1
            continue
        counts[gold][2] += 1
        if predicted in counts:
            counts[predicted][1] += 1
    # a LABELS class never targeted nor predicted has no F1; predicted-but-never-gold is 0
    scores = [2 * tp / (2 * tp + fp + fn) for tp, fp, fn in counts.values() if tp + fp + fn]
    return sum(scores) / len(scores)


def grade_batch(samples):
    if not samples:
        raise ValueError("macro_f1: no samples to score")
    golds, predictions = [], []
    for sample in samples:
        item = sample.get("item") or {}
        gold = item.get("target", sample.get("target"))
        if gold is None:
            raise ValueError(f"macro_f1: sample {sample.get('sample_index')} has no target")
        golds.append(_key(gold))
        predictions.append(_key(sample.get("extracted_output")))
    return {"metrics": {"macro_f1": macro_f1(golds, predictions)}}
