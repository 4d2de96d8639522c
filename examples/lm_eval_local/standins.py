"""Two stand-in models for notebooks/06_lm_eval.ipynb, and the local dataset folders it reads.

`make_folders()` writes small copies of gsm8k (``openai/gsm8k``, config ``main``) and
TriviaQA (``mandarjoshi/trivia_qa``, config ``rc.nocontext``) with their real columns and
made-up rows: Hugging Face folders (a README ``configs:`` block naming a JSONL file per split)
that lm-eval and evalnb both read. `standin_server()` answers them as two models of different
quality: every mistake is decided by a hash of the model and the question, so results are
reproducible. ``standin-strong`` ends its arithmetic with ``#### N`` (lm-eval's strict format);
``standin-weak`` is wrong more often and sometimes says "The answer is N." instead, which only
gsm8k's flexible-extract pipeline reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from evalnb.testing import LocalModelServer

HERE = Path(__file__).resolve().parent
ERROR_RATE = {"standin-strong": 0.15, "standin-weak": 0.45}


def _rows_gsm8k(split: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        a, b = 3 + (7 * i) % 19, 2 + (5 * i) % 13
        rows.append({"question": f"Mia has {a} marbles and wins {b} more at school ({split} {i}). How many marbles does she have now?",
                     "answer": f"She has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} marbles.\n#### {a + b}"})
    return rows


CITIES = ["Paris", "Rome", "Lima", "Oslo", "Cairo", "Quito", "Hanoi", "Dakar", "Perth", "Bern"]


def _rows_trivia(split: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        city = CITIES[i % len(CITIES)]
        rows.append({"question": f"Which capital is clue number {i} in the {split} quiz about", "question_id": f"{split}{i}",
                     "question_source": "made-up",
                     "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
                     "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [],
                                        "search_context": []},
                     "answer": {"aliases": [city, city.upper(), f"{city} (city)"], "normalized_aliases": [city.lower()],
                                "matched_wiki_entity_name": "", "normalized_matched_wiki_entity_name": "",
                                "normalized_value": city.lower(), "type": "WikipediaEntity", "value": city}})
    return rows


def _write(folder: Path, config: str, splits: dict[str, list[dict]]) -> Path:
    lines = ["---", "configs:", f"- config_name: {config}", "  data_files:"]
    for split, rows in splits.items():
        path = folder / config / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        lines += [f"  - split: {split}", f"    path: {config}/{split}.jsonl"]
    (folder / "README.md").write_text("\n".join(lines + ["---"]) + "\n", encoding="utf-8")
    return folder


def make_folders(root: Path = HERE) -> dict[str, str]:
    """The two dataset folders (rewritten each time: their content is fixed), by lm-eval dataset_path."""
    gsm8k = _write(root / "gsm8k", "main", {"train": _rows_gsm8k("train", 8), "test": _rows_gsm8k("test", 40)})
    trivia = _write(root / "trivia_qa", "rc.nocontext",
                    {"train": _rows_trivia("train", 8), "validation": _rows_trivia("validation", 40)})
    return {"openai/gsm8k": str(gsm8k), "mandarjoshi/trivia_qa": str(trivia)}


def _wrong(model: str, question: str) -> bool:
    digest = hashlib.sha256(f"{model}|{question}".encode()).digest()
    return digest[0] / 256 < ERROR_RATE.get(model, 0.5)


def _answer(body: dict) -> str:
    model = body.get("model", "")
    messages = body.get("messages") or []
    prompt = messages[-1]["content"] if messages else body.get("input", "")
    question = prompt.rsplit("Question:", 1)[-1]
    sum_match = re.search(r"has (\d+) marbles and wins (\d+)", question)
    if sum_match:
        a, b = int(sum_match.group(1)), int(sum_match.group(2))
        total = a + b + (1 if _wrong(model, question) else 0)
        if model == "standin-weak" and hashlib.md5(question.encode()).digest()[0] % 3 == 0:
            return f" Adding them up, the answer is {total}."
        return f" {a} + {b} = {total}.\n#### {total}"
    clue = re.search(r"clue number (\d+)", question)
    if clue:
        city = CITIES[int(clue.group(1)) % len(CITIES)]
        return " " + (CITIES[(CITIES.index(city) + 1) % len(CITIES)] if _wrong(model, question) else city.lower())
    return " I do not know."


def standin_server() -> LocalModelServer:
    """A started LocalModelServer answering as both stand-ins (stop it when done)."""
    return LocalModelServer(_answer).start()
