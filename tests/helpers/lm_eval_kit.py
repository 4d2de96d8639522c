"""Tiny local copies of lm-eval's datasets (the real column schemas) and lm-eval as the oracle.

`mirror(root, dataset_path, configs)` writes a Hugging Face folder (a README ``configs:``
block naming one JSONL file per split) that both ``datasets.load_dataset`` (lm-eval) and
evalnb read. `lm_eval_requests(task_name, folder, num_fewshot)` lets lm-eval build its own
requests from that folder and returns, per doc, its context, continuations and target.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def mirror(root: Path, name: str, configs: dict[str | None, dict[str, list[dict]]]) -> Path:
    """A local dataset folder; a config named None is ``default``.

    The folder's name carries a hash of the rows: the datasets library caches a local folder
    by its name, config and file names, not by its content, so two tests writing different
    rows under one name would read each other's."""
    digest = hashlib.sha256(json.dumps(configs, sort_keys=True, default=str).encode()).hexdigest()[:10]
    folder = root / f"{name.replace('/', '__')}-{digest}"
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        config_name = config or "default"
        lines.append(f"- config_name: {config_name}")
        lines.append("  data_files:")
        for split, rows in splits.items():
            path = folder / config_name / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
            lines += [f"  - split: {split}", f"    path: {config_name}/{split}.jsonl"]
    lines.append("---")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def lm_eval_task(task_name: str, folder: Path, num_fewshot: int, seed: int | None = 1234) -> Any:
    """lm-eval's own ConfigurableTask for a registry task, reading `folder`."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    from evalnb.suite.lm_eval_registry import task_index

    entry = task_index()[task_name]
    config = load_yaml(entry.yaml_path, resolve_func=True)
    for key in ("tag", "group", "task_list"):
        config.pop(key, None)
    config.update(dataset_path=str(folder), num_fewshot=num_fewshot)
    task = ConfigurableTask(config=config)
    task.set_fewshot_seed(seed)
    return task


def lm_eval_requests(task_name: str, folder: Path, num_fewshot: int) -> list[dict[str, Any]]:
    """Per evaluated doc, in order: lm-eval's context (a list of them for a multiple-input
    task), continuations and the doc itself."""
    task = lm_eval_task(task_name, folder, num_fewshot)
    task.build_all_requests()
    docs: dict[int, dict[str, Any]] = {}
    for inst in task.instances:
        entry = docs.setdefault(inst.doc_id, {"doc": inst.doc, "context": inst.arguments[0], "continuations": []})
        if task.multiple_input:  # winogrande: one context per choice, listed
            entry["context"] = (entry["context"] if isinstance(entry["context"], list) and inst.idx else [])
            entry["context"].append(inst.arguments[0])
        else:
            assert entry["context"] == inst.arguments[0]
        if inst.request_type == "loglikelihood":
            entry["continuations"].append(inst.arguments[1])
        else:
            entry["generation_kwargs"] = inst.arguments[1]
    out = [docs[i] for i in sorted(docs)]
    for entry in out:
        entry["target"] = task.doc_to_target(entry["doc"])
        if task.config.doc_to_choice is not None:
            entry["choices"] = task.doc_to_choice(entry["doc"])
    return out
