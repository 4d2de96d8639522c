"""What a resume takes from a stored run, and what it must not take from a foreign one.

A store is data, not authority: it may be a colleague's, or edited with ``sqlite3``. A stored
run's models say where requests go and which environment variable's key goes with them, and
its suite which files are read. A run this user's evalnb signed (`evalnb.store.sign_run`)
is taken as recorded. Any other run is *foreign*: its endpoints and key variables are shown
and refused unless the caller passes the models (``models=``, ``judge_model=``,
``embedding_model=``) or says ``trust_stored_models=True``; its suite is read like a manifest
from a file: local paths resolve inside the folder the store came in (the project folder of a
``.evalnb/evalnb.sqlite``), unless ``allow_paths_outside=True``.

The suite is judged apart from the models (`evalnb.store.foreign_suite`): the manifests sit in
their own table, so a run of one's own whose stored suite no longer hashes to what was signed
(edited by whoever held the project), or that was signed before suites were, keeps its models
but has its suite confined like a foreign one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalnb.errors import ForeignRunError, ManifestError
from evalnb.runner.run_plan import rebuild_model

__all__ = ["stored_models", "stored_suite", "store_folder"]


def store_folder(store: Any) -> Path:
    """The folder a store file came in: its project folder for ``<project>/.evalnb/evalnb.sqlite``."""
    folder = Path(store.path).parent
    return folder.parent if folder.name == ".evalnb" else folder


def stored_models(record: dict[str, Any], options: dict[str, Any], *, foreign: bool, models: Any,
                  judge_model: Any, embedding_model: Any, trust_stored_models: bool, executor: Any = None) -> list[Any]:
    """The models a resume calls; for a foreign run only those the caller passed (or trusts).
    A foreign run's Ray cluster address counts as an endpoint too (``executor=`` vouches for one)."""
    from evalnb.store import run_endpoints

    if foreign and not trust_stored_models:
        given = {"model": models, "judge_model": judge_model, "embedding_model": embedding_model,
                 "executor": executor}
        unvouched = [e for e in run_endpoints(record) if given[e["role"]] is None]
        if unvouched:
            lines = "; ".join(_endpoint_text(e) for e in unvouched)
            raise ForeignRunError(
                f"run {record['run_id']} was not recorded by your evalnb (its model records are not signed by "
                f"your key, {_key_hint()}): a resume would send requests, and your keys, where the store says: "
                f"{lines}. Pass the models yourself (resume(..., models=[...], judge_model=..., "
                "embedding_model=..., executor=...); CLI: evalnb resume --model NAME@URL,api_key_env=VAR ...), "
                "or trust_stored_models=True (CLI: --models-from-store) if you trust who wrote this store")
        for role in ("judge_model", "embedding_model"):  # the stored ones are gone: never rebuilt unvouched
            if given[role] is None:
                options[role] = None
    if models is not None:
        return list(models) if isinstance(models, (list, tuple)) else [models]
    summary = record.get("summary") or {}
    return [rebuild_model(m) for m in summary.get("models") or record["models"]]


def stored_suite(store: Any, record: dict[str, Any], *, foreign: bool, allow_paths_outside: bool) -> Any:
    """The run's suite: as recorded for a run of yours, confined like a manifest file for a foreign
    one (``foreign``: `evalnb.store.foreign_suite`, the run's or only its stored suite's)."""
    from evalnb.suite import Suite
    from evalnb.suite.paths import paths_outside

    # a run with prompt variants stored its expanded suite (one task per variant) and the suite as
    # given: the plan expands the latter again
    variants = (record.get("summary") or {}).get("variants") or {}
    manifest = store.get_suite(variants.get("base_version") or record["suite_version"])
    base_dir = (record.get("summary") or {}).get("base_dir")
    if not foreign or allow_paths_outside:
        return Suite.from_dict(manifest, base_dir=base_dir)
    why = _why_foreign(record)
    # the run's own folder when its record is yours (signed), else the folder the store came in
    own = base_dir is not None and why != _NOT_YOURS
    folder = Path(base_dir) if own else store_folder(store)
    suite = Suite.from_dict(manifest, base_dir=folder)
    problems = paths_outside(suite.tasks, folder)
    if problems:
        where = "the run's folder" if own else "the store's folder"
        for problem in problems:
            problem["msg"] += (f" (run {record['run_id']}'s stored suite is not one your evalnb signed: {why}; "
                               f"its paths resolve in {where}; resume(..., allow_paths_outside=True) lifts this)")
        raise ManifestError(problems)
    return suite


_NOT_YOURS = "the run was not recorded by your evalnb"


def _why_foreign(record: dict[str, Any]) -> str:
    from evalnb.store import foreign_run

    if foreign_run(record):
        return _NOT_YOURS
    if not isinstance((record.get("summary") or {}).get("suites"), dict):
        return "the run was recorded before evalnb signed suites"
    return "the suites table was edited since the run was recorded"


def _endpoint_text(endpoint: dict[str, Any]) -> str:
    """``model 'm' at URL with the key in $VAR`` (or: with no key), as the model would send it."""
    from evalnb.providers import Model

    if endpoint["role"] == "executor":
        return f"executor {endpoint['name']!r} at {endpoint['base_url']} (the calls, with your keys, run there)"
    try:
        env = Model(str(endpoint["name"]), base_url=endpoint["base_url"], api_key_env=endpoint["api_key_env"]).key_env
    except (TypeError, ValueError):
        env = endpoint["api_key_env"]
    key = f"with the key in ${env}" if env else "with no key"
    return f"{endpoint['role']} {endpoint['name']!r} at {endpoint['base_url'] or 'OpenAI'} {key}"


def _key_hint() -> str:
    from evalnb.store import trust_key_path

    return str(trust_key_path())
