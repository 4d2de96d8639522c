"""LLM-as-judge: a judge model grades the answer against a rubric; ``judge_score`` in [0, 1].

The judge (``ctx.responses_create(model="auto", ...)``: the run's judge model) sees the
prompt, the reference answer (``item["target"]``), the model's answer (``output_text``, the
raw text, so formatting the rubric may care about is visible) and the rubric, and is asked for
JSON ``{"score": <SCORE_MIN..SCORE_MAX>, "reason": "..."}``. The score is rescaled to
``(score - SCORE_MIN) / (SCORE_MAX - SCORE_MIN)`` so judges with different scales average the
same way; the raw score, the reason and the judge's raw text are kept under ``judge``.

Parsing is forgiving: code fences, text around the JSON, ``score`` as a string or ``"7/10"``,
or no JSON at all but a ``score: 7`` line. A reply with no usable score (or one outside the
scale) is asked again ``PARSE_RETRIES`` times; after that the grader raises ValueError with
the reply's start, so the sample is marked failed and is re-graded when the run is retried
(quietly scoring it ``None`` would drop hard cases from the mean without a trace).

Adapt: edit ``RUBRIC`` (or give a per-row ``rubric`` column), ``SCORE_MIN``/``SCORE_MAX``
(0/1 for a pass/fail rubric), ``JUDGE_KWARGS`` (e.g. ``{"temperature": 0}`` when the judge
model accepts it). Needs ``contract: "model_backed"`` (model access ``mka1``); each attempt is
one model call against ``max_model_calls``.
"""

import json
import re

RUBRIC = (
    "Score how well the answer responds to the prompt. It must be correct and consistent "
    "with the reference answer; wording may differ. Penalise factual errors, missing parts "
    "and unsupported claims. Ignore style unless the prompt asks for it."
)
SCORE_MIN = 1
SCORE_MAX = 10
PARSE_RETRIES = 1
JUDGE_KWARGS = {}

INSTRUCTIONS = (
    "You are a strict, impartial grader. Reply with only a JSON object: "
    '{{"score": <integer from {lo} to {hi}, {hi} is best>, "reason": "<one or two sentences>"}}.'
)

_SCORE_LINE = re.compile(
    r"""["']?score["']?\s*[:=]\s*["']?(-?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?""",
    re.IGNORECASE,
)


def build_input(sample, item):
    """The Responses ``input`` messages for one judgement."""
    rubric = item.get("rubric") or RUBRIC
    user = (
        f"## Prompt\n{sample.get('prompt') or item.get('prompt') or ''}\n\n"
        f"## Reference answer\n{item.get('target') or ''}\n\n"
        f"## Answer to grade\n{sample.get('output_text') or ''}\n\n"
        f"## Rubric\n{rubric}"
    )
    system = INSTRUCTIONS.format(lo=SCORE_MIN, hi=SCORE_MAX)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def reply_text(reply):
    """``output_text`` of a Responses reply, else its message text parts joined."""
    if isinstance(reply, str):
        return reply
    if not isinstance(reply, dict):
        text = getattr(reply, "output_text", None)
        return text if isinstance(text, str) else ""
    if isinstance(reply.get("output_text"), str):
        return reply["output_text"]
    parts = []
    for entry in reply.get("output") or []:
        for content in (entry or {}).get("content") or []:
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                parts.append(content["text"])
    return "".join(parts)


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?)\s*)?", value)
        if match:
            return _scaled_fraction(match.group(1), match.group(2))
    return None


def _scaled_fraction(top, bottom):
    value = float(top)
    if bottom is not None and float(bottom) > 0 and float(bottom) != SCORE_MAX:
        value = SCORE_MIN + (SCORE_MAX - SCORE_MIN) * value / float(bottom)
    return value


def _json_objects(text):
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def parse_verdict(text):
    """(score, reason) from a judge reply, or (None, None) when there is no score."""
    for obj in _json_objects(text):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        if "score" in lowered:
            score = _number(lowered["score"])
            if score is not None:
                reason = lowered.get("reason", lowered.get("explanation"))
                return score, None if reason is None else str(reason)
    match = _SCORE_LINE.search(text)
    if match:
        return _scaled_fraction(match.group(1), match.group(2)), None
    return None, None


def grade(sample, item, ctx):
    messages = build_input(sample, item)
    text = ""
    for _ in range(1 + max(0, PARSE_RETRIES)):
        text = reply_text(ctx.responses_create(model="auto", input=messages, **JUDGE_KWARGS))
        score, reason = parse_verdict(text)
        if score is not None and SCORE_MIN <= score <= SCORE_MAX:
            normalized = (score - SCORE_MIN) / (SCORE_MAX - SCORE_MIN)
            return {
                "scores": {"judge_score": normalized},
                "judge": {"score": score, "reason": reason, "raw": text},
            }
    raise ValueError(
        f"llm_judge: no score between {SCORE_MIN} and {SCORE_MAX} in the judge's reply "
        f"(after {1 + max(0, PARSE_RETRIES)} attempts): {text[:200]!r}"
    )
