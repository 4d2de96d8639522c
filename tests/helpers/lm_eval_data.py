"""Rows with the real column schemas of the datasets behind six lm-eval tasks (made-up content).

`DATASETS[task] = (dataset_path, {config: {split: rows}})`; the content varies per row
(whitespace, punctuation, non-ASCII) so a prompt that differs from lm-eval's by one byte shows.
"""

from __future__ import annotations


def _arc(split: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        labels = ["A", "B", "C", "D"] if i % 3 else ["1", "2", "3"]
        texts = [f"{split} option {j} for q{i}" + (" (é)" if j == 1 else "") for j in range(len(labels))]
        rows.append({"id": f"{split}-{i}", "question": f"Which {split} thing #{i} is true?",
                     "choices": {"text": texts, "label": labels}, "answerKey": labels[i % len(labels)]})
    return rows


def _mmlu(split: str, n: int) -> list[dict]:
    return [{"question": f"  Let G be a group of order {i + 4} ({split}). Is G abelian?  ",
             "subject": "abstract_algebra",
             "choices": [f"True{i}", "False", f"{i} only", "None of these"], "answer": i % 4}
            for i in range(n)]


def _hellaswag(split: str, n: int) -> list[dict]:
    return [{"ind": i, "activity_label": f"Making tea {split}",
             "ctx_a": f"A person [title] fills a kettle {i}.", "ctx_b": "then they",
             "ctx": f"A person fills a kettle {i}. then they",
             "endings": [f"boil it [step] {i}.", "drink  the kettle.", "sing.", f"wait {i} minutes."],
             "source_id": f"wikihow~{i}", "split": split, "split_type": "indomain", "label": str(i % 4)}
            for i in range(n)]


def _boolq(split: str, n: int) -> list[dict]:
    return [{"question": f"is the {split} sky blue on day {i}", "passage": f"Passage {i}: the sky — a dome.",
             "idx": i, "label": i % 2} for i in range(n)]


def _gsm8k(split: str, n: int) -> list[dict]:
    return [{"question": f"Tom has {i + 2} apples and buys {i} more ({split}). How many?",
             "answer": f"He has {i + 2} + {i} = <<{i + 2}+{i}={2 * i + 2}>>{2 * i + 2} apples.\n#### {2 * i + 2}"}
            for i in range(n)]


def _truthfulqa(split: str, n: int) -> list[dict]:
    return [{"question": f"What happens if you eat {i} watermelon seeds?",
             "mc1_targets": {"choices": [f"Nothing happens {i}.", "You grow watermelons.", "You die."],
                             "labels": [1, 0, 0]},
             "mc2_targets": {"choices": ["Nothing.", "Watermelons."], "labels": [1, 0]}}
            for i in range(n)]


def _triviaqa(split: str, n: int) -> list[dict]:
    return [{"question": f"Which city hosted event {i} ({split})", "question_id": f"tq{i}",
             "question_source": "web", "entity_pages": {"doc_source": [], "filename": [], "title": [],
                                                         "wiki_context": []},
             "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [],
                                "search_context": []},
             "answer": {"aliases": [f"City {i}", f"C{i}", "Paris, France"], "normalized_aliases": [f"city {i}"],
                        "matched_wiki_entity_name": "", "normalized_matched_wiki_entity_name": "",
                        "normalized_value": f"city {i}", "type": "WikipediaEntity", "value": f"City {i}"}}
            for i in range(n)]


def _lambada(split: str, n: int) -> list[dict]:
    words = ["kettle", "garden", "river", "lantern", "harbour", "meadow"]
    return [{"text": f"She walked {i} miles along the quiet road and at last she saw the {words[i % len(words)]}"}
            for i in range(n)]


def _pile(split: str, n: int) -> list[dict]:
    return [{"text": f"We prove theorem {i}.  The proof uses   induction on n — and ends here.", "meta": {"i": i}}
            for i in range(n)]


def _nq_open(split: str, n: int) -> list[dict]:
    return [{"question": f"who wrote the {split} song number {i}", "answer": [f"Ann Lee {i}", "the Beatles"]}
            for i in range(n)]


def _unscramble(split: str, n: int) -> list[dict]:
    words = ["garden", "lantern", "harbour", "meadow", "kettle"]
    return [{"context": f"Please unscramble the letters into a word, and write that word:\n"
                        f"{words[i % 5][0]}{words[i % 5][2:0:-1]}{words[i % 5][3:]} =",
             "completion": f" {words[i % 5]}"} for i in range(n)]


DATASETS = {
    "arc_easy": ("allenai/ai2_arc", {"ARC-Easy": {"train": _arc("train", 6), "validation": _arc("validation", 4),
                                                   "test": _arc("test", 5)}}),
    "mmlu_abstract_algebra": ("cais/mmlu", {"abstract_algebra": {"dev": _mmlu("dev", 5), "validation": _mmlu("validation", 3),
                                                                  "test": _mmlu("test", 6)}}),
    "hellaswag": ("Rowan/hellaswag", {None: {"train": _hellaswag("train", 6), "validation": _hellaswag("validation", 5)}}),
    "boolq": ("aps/super_glue", {"boolq": {"train": _boolq("train", 6), "validation": _boolq("validation", 5)}}),
    "gsm8k": ("openai/gsm8k", {"main": {"train": _gsm8k("train", 7), "test": _gsm8k("test", 4)}}),
    "triviaqa": ("mandarjoshi/trivia_qa", {"rc.nocontext": {"train": _triviaqa("train", 5),
                                                             "validation": _triviaqa("validation", 4)}}),
    "lambada_openai": ("EleutherAI/lambada_openai", {"default": {"test": _lambada("test", 6)}}),
    "pile_arxiv": ("EleutherAI/pile", {"pile_arxiv": {"train": _pile("train", 4)}}),
    "nq_open": ("google-research-datasets/nq_open", {None: {"train": _nq_open("train", 5),
                                                              "validation": _nq_open("validation", 4)}}),
    "anagrams1": ("EleutherAI/unscramble", {"mid_word_1_anagrams": {"validation": _unscramble("validation", 4)}}),
    "truthfulqa_mc1": ("truthfulqa/truthful_qa", {"multiple_choice": {"validation": _truthfulqa("validation", 4)}}),
}
