"""The preprocessor an imported lm-eval task runs in the sandbox: lm-eval's doc rendering, copied.

This file is self-contained (standard library, ``jinja2`` and ``datasets``) but for
`evalnb.suite.lm_eval_hooks`, whose source is put before it: both are carried into the
manifest by `evalnb.suite.lm_eval_import`, followed by the task's ``CONFIG`` (its lm-eval
fields as JSON) and ``MODULES`` (the source of each ``utils.py`` its ``!function`` hooks name).
``process_docs(rows)`` is the batch preprocessor: rows become a
``datasets.Dataset`` (as lm-eval's docs are), the task's own ``process_docs`` runs on it, and
each doc gets an ``lm_eval`` field with what lm-eval would build from it, string for string:

- ``prompt``: ``doc_to_text`` (plus ``gen_prefix``) as the evaluated question;
- ``description``: the task's description resolved against the doc;
- ``target``: the gold choice's index for multiple choice, else ``doc_to_target`` as text;
- ``choices`` and ``continuations`` (each choice after ``target_delimiter``); for a
  multiple-input doc (``doc_to_text`` gives the gold's index: winogrande) the choices are
  contexts: ``contexts`` holds each as lm-eval's ``multiple_input_context`` renders it, the
  ``prompt`` is empty and the one continuation is ``target_delimiter`` + ``doc_to_target``;
- ``shot_prompt`` / ``shot_target``: the doc rendered as a few-shot example (fewshot
  overrides applied, delimiters included), so ``shot_prompt + shot_target`` is what lm-eval
  puts in a context for this doc.

The code mirrors ``lm_eval.api.task.ConfigurableTask`` (0.4.x: ``doc_to_text``,
``doc_to_target``, ``doc_to_choice``, ``build_qa_turn``, ``fewshot_context``); Jinja is
rendered as ``lm_eval.utils.apply_template`` renders it, in a sandboxed environment.
"""

import ast
import json
import re

if "hook" not in globals():  # imported as a module; in a manifest `lm_eval_hooks`' source comes first
    from evalnb.suite.lm_eval_hooks import function as _function, hook as _hook
else:
    _function, _hook = function, hook  # noqa: F821 - defined by the source put before this one

CONFIG = {}  # replaced by the importer

_TEMPLATES = {}
_ENV = []


def _regex_replace(string, pattern, repl, count=0):
    return re.sub(pattern, repl, string, count=count)


def _env():
    if not _ENV:
        from jinja2 import BaseLoader, StrictUndefined
        from jinja2.sandbox import SandboxedEnvironment

        env = SandboxedEnvironment(loader=BaseLoader, undefined=StrictUndefined, keep_trailing_newline=True)
        env.filters["regex_replace"] = _regex_replace
        _ENV.append(env)
    return _ENV[0]


def apply_template(template, doc):
    compiled = _TEMPLATES.get(template)
    if compiled is None:
        compiled = _TEMPLATES[template] = _env().from_string(template)
    return compiled.render(**doc)


class _Task:
    """The slice of ConfigurableTask that turns docs into text."""

    def __init__(self, config, features):
        self.config = config
        self.features = features
        self.has_choice = config.get("doc_to_choice") is not None

    def doc_to_text(self, doc, spec=None):
        spec = _hook(self.config.get("doc_to_text") if spec is None else spec)
        if isinstance(spec, int):
            return spec
        if isinstance(spec, str):
            if spec in self.features:
                return doc[spec]
            text = apply_template(spec, doc)
            if text.isdigit() and self.has_choice:
                return ast.literal_eval(text)
            return text
        if callable(spec):
            return spec(doc)
        raise TypeError(f"doc_to_text of type {type(spec).__name__} is not supported")

    def doc_to_target(self, doc, spec=None):
        spec = _hook(self.config.get("doc_to_target") if spec is None else spec)
        if isinstance(spec, int):
            return spec
        if isinstance(spec, str):
            if spec in self.features:
                return doc[spec]
            text = apply_template(spec, doc)
            if text.isdigit() and self.has_choice:
                return ast.literal_eval(text)
            if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
                try:
                    return ast.literal_eval(text)
                except (SyntaxError, ValueError):
                    return text
            return text
        if isinstance(spec, list):
            return spec
        if callable(spec):
            return spec(doc)
        raise TypeError(f"doc_to_target of type {type(spec).__name__} is not supported")

    def doc_to_choice(self, doc, spec=None):
        spec = _hook(self.config.get("doc_to_choice") if spec is None else spec)
        if isinstance(spec, str):
            if spec in self.features:
                return doc[spec]
            return ast.literal_eval(apply_template(spec, doc))
        if isinstance(spec, list):
            return spec
        if isinstance(spec, dict):
            return list(spec.values())
        if callable(spec):
            return spec(doc)
        raise TypeError(f"doc_to_choice of type {type(spec).__name__} is not supported")

    def resolve_field(self, doc, field):
        if field:
            return doc[field] if field in doc else apply_template(field, doc)
        return None


def _requires_delimiter(prefix, suffix):
    if prefix == "":
        return False
    return not (prefix[-1].isspace() or suffix[0].isspace())


def _maybe_delimit(prefix, suffix, delimiter=" "):
    if not prefix:
        return suffix or ""
    if not suffix:
        return prefix or ""
    if prefix[-1].isspace() or suffix[0].isspace():
        return prefix + suffix
    return prefix + delimiter + suffix


def qa_turn(q, c=None, a=None, gen_prefix=None, tgt_delim=" ", few_delim="\n\n"):
    """lm-eval's build_qa_turn as plain text: (question part, answer part)."""
    if not isinstance(q, str):
        raise TypeError(f"doc_to_text gave {type(q).__name__}, not text (multiple-input tasks are not supported)")
    has_answer = a is not None and a != ""
    if has_answer and not gen_prefix:
        user = q + tgt_delim
    elif gen_prefix and _requires_delimiter(q, gen_prefix):
        user = q + tgt_delim
    else:
        user = q
    if has_answer:
        if c and isinstance(a, int):
            answer = c[a]
        elif isinstance(a, list):
            answer = a[0]
        else:
            answer = a
        if not isinstance(answer, str):
            raise TypeError(f"the few-shot answer is {type(answer).__name__}, not text: {answer!r}")
        return user, _maybe_delimit(gen_prefix, answer, " ") + few_delim
    if gen_prefix:
        return user, gen_prefix
    return user, ""


def _gold_index(gold, choices):
    """lm-eval's gold for multiple choice: an index (-100 when out of range or not a choice)."""
    if isinstance(gold, list):
        return [g if g < len(choices) else -100 for g in gold]
    if isinstance(gold, bool):
        gold = int(gold)
    if isinstance(gold, int):
        return gold if gold < len(choices) else -100
    if isinstance(gold, str):
        return choices.index(gold) if gold in choices else -100
    return -100


def _text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render_doc(task, doc):
    """The ``lm_eval`` field of one doc (see the module docstring)."""
    cfg = task.config
    fs = cfg.get("fewshot") or {}
    output_type = cfg.get("output_type", "generate_until")
    out = {"description": task.resolve_field(doc, cfg.get("description")) or ""}

    # the evaluated question (fewshot_context's last turn: no answer, few_delim "")
    q = task.doc_to_text(doc)
    gen_prefix = task.resolve_field(doc, cfg.get("gen_prefix")) if cfg.get("gen_prefix") is not None else None
    target = task.doc_to_target(doc)
    if isinstance(q, int) and not isinstance(q, bool) and output_type == "multiple_choice" and task.has_choice:
        # lm-eval's multiple_input_context: one context per choice, the same continuation
        choices = [str(c) if not isinstance(c, str) else c for c in task.doc_to_choice(doc)]
        out["prompt"] = ""
        out["contexts"] = ["".join(qa_turn(c, gen_prefix=gen_prefix, tgt_delim="", few_delim="")) for c in choices]
        out["choices"] = choices
        out["continuations"] = [cfg.get("target_delimiter", " ") + _text(target)]
        out["gold_index"] = _gold_index(q, choices)
        out["target"] = _text(out["gold_index"])
        _shot(task, doc, fs, out)
        return out
    user, assistant = qa_turn(q, gen_prefix=gen_prefix, tgt_delim=cfg.get("target_delimiter", " "), few_delim="")
    out["prompt"] = user + assistant

    if output_type == "multiple_choice":
        choices = [str(c) if not isinstance(c, str) else c for c in task.doc_to_choice(doc)]
        delim = cfg.get("target_delimiter", " ")
        out["choices"] = choices
        out["continuations"] = [delim + c for c in choices]
        gold = _gold_index(target, choices)
        out["gold_index"] = gold
        out["target"] = _text(gold)
    elif output_type == "generate_until" and task.has_choice:
        choices = task.doc_to_choice(doc)
        out["gold"] = choices[target]
        out["target"] = _text(choices[target])
    elif output_type == "loglikelihood":
        out["target"] = _text(target)
        out["continuations"] = [_text(target)]
    else:
        out["gold"] = target
        out["target"] = _text(target)

    _shot(task, doc, fs, out)
    return out


def _shot(task, doc, fs, out):
    """The doc as a few-shot example (``fs``: the effective fewshot_config; nothing without it).
    A multiple-input doc's question is its gold context, with no choices (as lm-eval renders it)."""
    if not fs:
        return
    c = task.doc_to_choice(doc, fs["doc_to_choice"]) if fs.get("doc_to_choice") else None
    a = task.doc_to_target(doc, fs.get("doc_to_target"))
    q = task.doc_to_text(doc, fs.get("doc_to_text"))
    if isinstance(q, int) and not isinstance(q, bool) and c is not None:
        q, c = c[q], None
    shot_q, shot_a = qa_turn(q, c, a, gen_prefix=task.resolve_field(doc, fs.get("gen_prefix")),
                             tgt_delim=fs["target_delimiter"], few_delim=fs["fewshot_delimiter"])
    out["shot_prompt"], out["shot_target"] = shot_q, shot_a


def _plain(value):
    """A doc value as plain JSON types (the sandbox sends rows back as JSON)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return str(value)


def docs_of(rows):
    """The rows as lm-eval's docs: a datasets.Dataset, through the task's process_docs."""
    import datasets

    dataset = datasets.Dataset.from_list(list(rows))
    hook = CONFIG.get("process_docs")
    if hook is not None:
        _seed_as_lm_eval()
        dataset = _function(hook["function"])(dataset)
    return dataset


def _seed_as_lm_eval():
    """Seed the global generators as ``lm_eval.evaluator.simple_evaluate`` does before it builds
    tasks (``random.seed(0)``, then ``numpy.random.seed(1234)``; torch is not seeded here), so
    a ``process_docs`` that shuffles (leaderboard_gpqa_*, gpqa) gives lm-eval's prompts and gold,
    and the same ones on every run. Each task starts from the seed, as a task run alone by
    lm-eval does (several tasks in one lm-eval run share one stream)."""
    import random

    random.seed(0)
    try:
        import numpy
    except ImportError:  # pragma: no cover - datasets needs numpy
        return
    numpy.random.seed(1234)


def process_docs(rows):
    """The batch preprocessor: each doc with its ``lm_eval`` field."""
    if not rows:
        return []
    docs = docs_of(rows)
    features = list(docs.features.keys()) if hasattr(docs, "features") else list(docs[0].keys()) if len(docs) else []
    task = _Task(CONFIG, features)
    shots = _inline_shots(task)
    out = []
    for index, doc in enumerate(docs):
        row = _plain(dict(doc))
        rendered = render_doc(task, doc)
        if shots is not None:
            rendered["description"] += shots(index)
        row["lm_eval"] = _plain(rendered)
        out.append(row)
    return out


def _inline_shots(task):
    """``fewshot_config.samples``: row index -> the rendered examples (None without them).

    ``first_n`` gives every row the first ``count`` samples, as lm-eval does; the default
    sampler draws ``count`` distinct samples per row from ``Random("seed:index")``.
    """
    spec = CONFIG.get("inline_shots")
    if not spec:
        return None
    samples = _hook(spec["samples"])
    samples = list(samples() if callable(samples) else samples)
    fs = CONFIG["fewshot"]
    count = min(spec["count"], len(samples))

    def render(doc):
        c = task.doc_to_choice(doc, fs["doc_to_choice"]) if fs.get("doc_to_choice") else None
        q, a = qa_turn(task.doc_to_text(doc, fs.get("doc_to_text")), c, task.doc_to_target(doc, fs.get("doc_to_target")),
                       gen_prefix=task.resolve_field(doc, fs.get("gen_prefix")),
                       tgt_delim=fs["target_delimiter"], few_delim=fs["fewshot_delimiter"])
        return q + a

    if spec["sampler"] == "first_n":
        block = "".join(render(doc) for doc in samples[:count])
        return lambda index: block
    import random

    rendered = [render(doc) for doc in samples]
    return lambda index: "".join(rendered[j] for j in random.Random(f"{spec['seed']}:{index}").sample(range(len(samples)), count))
