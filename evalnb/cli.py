"""The ``evalnb`` command: validate, preview and run suites, then list, show and export runs.

Only argparse and the standard library load at start-up; each subcommand imports what it
needs, so ``evalnb --help`` never loads pandas. Exit codes: 0 success; 1 bad input or a
failed run (a failed sample counts, unless ``--allow-failures``); 2 a usage error (argparse);
130 interrupted. API keys come from environment variables only — a ``--api-key`` flag would
land in shell history: OpenAI hosts read ``OPENAI_API_KEY``, other servers get no key unless
``--api-key-env VAR`` names one (as `evalnb.Model` does: your OpenAI key is never sent
elsewhere by default).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from evalnb.errors import EvalnbError, ManifestError

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.suite import Suite
    from evalnb.providers.model import Model
    from evalnb.results.run_result import RunResult
    from evalnb.store import Store

EXPORT_FORMATS = ("jsonl", "csv", "parquet")
SAMPLE_ROWS = 20  # default --limit of `show --samples` and `runs`


class CliError(Exception):
    """A failure the user can fix: its message goes to stderr and the command exits 1."""


def console() -> None:
    """The ``evalnb`` console script and ``python -m evalnb``: this process is evalnb's own."""
    from evalnb._gc import own_this_process

    own_this_process()
    sys.exit(main())


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code (the console script passes it to sys.exit)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: return argparse's code
        return exc.code if isinstance(exc.code, int) else 1
    if args.command is None:
        parser.print_usage(sys.stderr)
        return 2
    saved_home = os.environ.get("EVALNB_HOME")
    if args.home is not None:
        os.environ["EVALNB_HOME"] = str(Path(args.home).expanduser())
    _STORE_FILE[0] = Path(args.store).expanduser() if getattr(args, "store", None) else None
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except (CliError, EvalnbError, ValueError, KeyError, OSError) as exc:
        if args.traceback and not isinstance(exc, CliError):
            raise
        message = str(exc.args[0]) if type(exc) is KeyError and exc.args else str(exc)
        if message:
            _err(message)
        return 1
    finally:
        _STORE_FILE[0] = None
        if saved_home is None:
            os.environ.pop("EVALNB_HOME", None)
        else:
            os.environ["EVALNB_HOME"] = saved_home


# ---- arguments ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from evalnb import __version__

    parser = argparse.ArgumentParser(
        prog="evalnb", description="Validate, preview and run evalnb suites; list, show and export runs.",
        epilog="Exit codes: 0 ok, 1 invalid input or failed run, 2 usage error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"evalnb {__version__}")
    _global_options(parser, suppress=False)
    # The same options after the subcommand (`evalnb runs --home DIR`); SUPPRESS keeps the
    # value given before it when they are absent here.
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("validate", parents=[common],
                       help="check a manifest, its data and its code; list every problem a run would hit")
    p.add_argument("file", help="suite manifest (.json, .yaml, .yml)")
    _allow_paths_flag(p)
    p.add_argument("--schema-only", action="store_true",
                   help="check the manifest alone: read no rows, load no code")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("import-lm-eval", parents=[common],
                       help="write a manifest from lm-evaluation-harness tasks (names, groups, YAML paths)")
    p.add_argument("tasks", nargs="+", metavar="TASK", help="lm-eval task, group or tag name, or a task YAML path")
    p.add_argument("-o", "--output", help="manifest file to write (.yaml, .yml or .json; default: YAML on stdout)")
    p.add_argument("--num-fewshot", type=_non_negative, help="few-shot examples per prompt (default: each task's)")
    p.add_argument("--dataset-path", action="append", default=[], metavar="DATASET=FOLDER",
                   help="read lm-eval dataset_path DATASET from a local Hugging Face folder (repeatable)")
    p.add_argument("--limit-rows", type=_positive, help="read at most N rows per task (max_rows)")
    p.add_argument("--allow-paths-outside", action="store_true",
                   help="let a task's include: and !function files leave its folder (absolute, ~, ..); "
                        "only for a task folder you trust")
    p.set_defaults(handler=cmd_import_lm_eval)

    p = sub.add_parser("preview", parents=[common], help="show the prompt, target and row of an item")
    p.add_argument("file", help="suite manifest")
    _allow_paths_flag(p)
    p.add_argument("--task", help="task id (default: the first task)")
    p.add_argument("--index", type=_non_negative, default=0, help="item index (default 0)")
    p.add_argument("--limit", type=_positive, default=1, help="how many items from --index (default 1)")
    p.add_argument("--raw", action="store_true", help="print the prompt exactly as sent, without headers")
    p.set_defaults(handler=cmd_preview)

    p = sub.add_parser("run", parents=[common], help="run a suite against models and print its metrics")
    p.add_argument("file", help="suite manifest")
    _allow_paths_flag(p)
    p.add_argument("--model", action="append", required=True, metavar="NAME[@BASE_URL][,api=chat][,label=X]",
                   help="candidate model (repeat for several); without @BASE_URL: OpenAI. Options after commas "
                        "are this model's own: api=chat|responses|completions, label=X (its name in the results), "
                        "base_url=URL, api_key_env=VAR")
    p.add_argument("--api", choices=MODEL_APIS,
                   help="API of the models that set no api= of their own (default: responses, as evalnb.Model); "
                        "use chat for servers without the Responses API, completions to score choices by "
                        "log-likelihood (imported lm-eval multiple-choice and perplexity tasks)")
    p.add_argument("--concurrency", type=_positive, default=4, help="model calls in flight (1-25, default 4)")
    p.add_argument("--max-samples", type=_positive, help="at most N items per task")
    p.add_argument("--epochs", type=_positive, default=1, metavar="K",
                   help="ask every item K times, each a request of its own (1-100, default 1); "
                        "metrics average each item over its epochs")
    p.add_argument("--task", action="append", metavar="ID", help="run only this task (repeatable)")
    p.add_argument("--generation", type=_json_object, metavar="JSON",
                   help='generation settings as a JSON object or @file.json, e.g. \'{"temperature": 0}\'')
    p.add_argument("--judge-model", metavar="NAME[@BASE_URL][,api=chat]",
                   help="model for ctx.responses_create (the same options as --model)")
    p.add_argument("--embedding-model", metavar="NAME[@BASE_URL]", help="model for ctx.embeddings_create")
    p.add_argument("--judge-generation", type=_json_object, metavar="JSON",
                   help='defaults of the judge calls graders make, e.g. \'{"temperature": 0, "max_output_tokens": 256}\'')
    p.add_argument("--price", action="append", type=_price, default=[], metavar="NAME=INPUT,OUTPUT[,CACHED]",
                   help="a model's price in USD per 1M tokens (input, output, optionally cached input), "
                        "NAME a --model, --judge-model or --embedding-model name (repeatable)")
    p.add_argument("--max-cost-usd", type=_usd, metavar="USD",
                   help="stop the run (status 'stopped') before a call could take its spend past USD; "
                        "needs --price and generation max_output_tokens")
    p.add_argument("--batch-discount", type=_factor, metavar="FACTOR",
                   help="batched calls cost FACTOR times the --price (e.g. 0.5); for --executor batch")
    p.add_argument("--executor", choices=("local", "ray", "batch"), default="local",
                   help="where the calls are made: this process (default), Ray workers, or the provider's "
                        "Batch API (cheaper, answers within 24h; EVALNB_BATCH_POLL_S sets how often it looks)")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="read the key of every model without api_key_env= of its own from $VAR (default: "
                        "OPENAI_API_KEY for OpenAI hosts, no key for other servers); only for models on one "
                        "host: otherwise give api_key_env= per --model")
    p.add_argument("--base-url", metavar="URL",
                   help="server of every model without @URL or base_url= of its own (default: OpenAI)")
    p.add_argument("--name", metavar="TEXT", help='a name for the run, shown by `evalnb runs` (e.g. "v2: neutral defined")')
    p.add_argument("--variant", action="append", type=_variant, default=[], metavar="NAME=FILE.yaml",
                   help="a prompt variant: FILE (YAML or JSON) holds the task fields it overrides, e.g. "
                        "prompt_template, or {tasks: {ID: {...}}}; an empty file is the suite as written; "
                        "repeat for several: every model runs under every variant")
    p.add_argument("--no-reuse", action="store_true", help="call the models again instead of reusing stored outputs")
    p.add_argument("--allow-failures", action="store_true", help="exit 0 even if some samples failed")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("resume", parents=[common], help="continue a run that died, failed or was stopped")
    p.add_argument("run_id", help="run id, a unique prefix or suffix of one, or 'latest'")
    p.add_argument("--force", action="store_true",
                   help="take over a run whose owner was on another host (e.g. a re-created container)")
    p.add_argument("--concurrency", type=_positive, help="model calls in flight (default: the run's own)")
    p.add_argument("--max-cost-usd", type=_usd, metavar="USD",
                   help="a new budget for the whole run (what it spent before counts; default: the run's own)")
    p.add_argument("--retry-failed", action="store_true",
                   help="also send again the samples that failed for their own reasons (a 400 for that prompt, "
                        "a grader error); by default only transport and provider failures and not-run samples are")
    p.add_argument("--model", action="append", metavar="NAME[@BASE_URL][,api=chat][,label=X]",
                   help="call this model instead of the stored ones (repeat for several; the same per-model "
                        "options as `evalnb run --model`: api=, label=, base_url=, api_key_env=); for a run "
                        "your evalnb did not record, the way to resume it with models you vouch for")
    p.add_argument("--judge-model", metavar="NAME[@BASE_URL][,api=chat]",
                   help="judge model instead of the stored one (the same options as --model)")
    p.add_argument("--embedding-model", metavar="NAME[@BASE_URL]", help="embedding model instead of the stored one")
    p.add_argument("--price", action="append", type=_price, default=[], metavar="NAME=INPUT,OUTPUT[,CACHED]",
                   help="a given model's price in USD per 1M tokens (for a budget), NAME a --model, "
                        "--judge-model or --embedding-model name (repeatable)")
    p.add_argument("--models-from-store", action="store_true",
                   help="a run your evalnb did not record (someone else's store): call the models the store names, "
                        "with the key variables it names; only for a store you trust")
    _allow_paths_flag(p)
    p.add_argument("--allow-failures", action="store_true", help="exit 0 even if some samples failed")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.set_defaults(handler=cmd_resume)

    p = sub.add_parser("cancel", parents=[common],
                       help="cancel the provider batches of a run made with --executor batch")
    p.add_argument("run_id", help="run id, a unique prefix or suffix of one, or 'latest'")
    p.set_defaults(handler=cmd_cancel)

    p = sub.add_parser("runs", parents=[common], help="list stored runs, newest first")
    p.add_argument("--limit", type=_non_negative, default=SAMPLE_ROWS, help="at most N runs (0: all; default 20)")
    p.set_defaults(handler=cmd_runs)

    p = sub.add_parser("show", parents=[common], help="a run's metrics (and samples)")
    p.add_argument("run_id", help="run id, a unique prefix or suffix of one, or 'latest'")
    p.add_argument("--samples", action="store_true", help="also list samples")
    p.add_argument("--failed", action="store_true", help="with --samples: only failed samples")
    p.add_argument("--limit", type=_non_negative, default=SAMPLE_ROWS, help="at most N samples (0: all; default 20)")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("export", parents=[common], help="write a run's samples or metrics to a file")
    p.add_argument("run_id", help="run id, a unique prefix or suffix of one, or 'latest'")
    p.add_argument("--format", choices=EXPORT_FORMATS, help="default: from -o's suffix, else jsonl")
    p.add_argument("--what", choices=("samples", "metrics", "scores"), default="samples", help="default: samples")
    p.add_argument("-o", "--output", metavar="PATH", help="default: <run_id>.<what>.<format> here; '-': stdout")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("report", parents=[common], help="one offline HTML page for a run or an executed notebook")
    p.add_argument("source", help="a run id (a unique prefix or suffix, or 'latest'), or a NOTEBOOK.ipynb")
    p.add_argument("--baseline", metavar="RUN_ID", help="runs: add the diff against this run")
    p.add_argument("--execute", action="store_true", help="notebooks: execute it first (in its folder)")
    p.add_argument("--interactive", action="store_true",
                   help="notebooks: live Plotly charts, plotly.js inlined once (~4.8 MB); default: pictures")
    p.add_argument("-o", "--output", metavar="PATH", help="default: <run_id>.html or <notebook>.html here")
    p.set_defaults(handler=cmd_report)
    return parser


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    parser.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS if suppress else None,
                        help="evalnb home folder (sets EVALNB_HOME for this command)")
    parser.add_argument("--store", metavar="FILE", default=argparse.SUPPRESS if suppress else None,
                        help="the store file to use instead of <home>/evalnb.sqlite (e.g. one a colleague sent)")
    parser.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="show the full traceback of an error")


def _positive(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (found {value})")
    return value


def _non_negative(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (found {value})")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of USD: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of USD >= 0, got {text!r}")
    return value


def _price(text: str) -> tuple[str, dict[str, float]]:
    """``NAME=INPUT,OUTPUT[,CACHED]`` -> (name, price dict), USD per 1M tokens."""
    name, sep, numbers = text.rpartition("=")
    parts = numbers.split(",")
    if not sep or not name or len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"expected NAME=INPUT,OUTPUT[,CACHED_INPUT] (USD per 1M tokens), got {text!r}")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"prices must be numbers (USD per 1M tokens), got {numbers!r}") from None
    return name, dict(zip(("input", "output", "cached_input"), values))


def _factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a factor in (0, 1], e.g. 0.5 for half price, got {text!r}")
    return value


def _variant(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=FILE.yaml`` (or .json): a variant's name and the task fields it overrides."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError("must be NAME=FILE.yaml (the file holds the task fields to override)")
    try:
        body = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror}") from None
    import yaml

    try:
        value = yaml.safe_load(body) if body.strip() else {}
    except yaml.YAMLError as exc:
        raise argparse.ArgumentTypeError(f"{path}: not valid YAML/JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{path}: must hold a mapping of task fields, like 'prompt_template: ...'")
    return name, value


def _json_object(text: str) -> dict[str, Any]:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('must be a JSON object, like \'{"temperature": 0}\'')
    return value


# ---- validate and preview -----------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from evalnb.suite.manifest import dataset_kind

    suite = _load_suite(args.file, args.allow_paths_outside)
    problems = [] if args.schema_only else suite.validate()
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise CliError("\n".join([f"{args.file}: a run would fail ({len(problems)} {noun})", *map(str, problems)]))
    tasks = ", ".join(f"{t.id} ({t.type}, {dataset_kind(t.dataset)} dataset)" for t in suite.tasks)
    noun = "task" if len(suite.tasks) == 1 else "tasks"
    scope = " (schema only)" if args.schema_only else ""
    print(f"{args.file}: valid{scope}; suite version {suite.version[:12]}; {len(suite.tasks)} {noun}: {tasks}")
    return 0


def cmd_import_lm_eval(args: argparse.Namespace) -> int:
    from evalnb.suite import Suite
    from evalnb.suite.manifest import yaml_text

    paths = {}
    for pair in args.dataset_path:
        name, sep, folder = pair.partition("=")
        if not sep or not name or not folder:
            raise CliError(f"--dataset-path {pair!r}: expected DATASET=FOLDER")
        paths[name] = str(Path(folder).expanduser().resolve())
    suite = Suite.from_lm_eval(list(args.tasks), num_fewshot=args.num_fewshot, dataset_paths=paths,
                               limit_rows=args.limit_rows, allow_paths_outside=args.allow_paths_outside)
    data = suite.to_dict()
    out = args.output
    if out is not None:
        outside = _relative_dataset_paths(data, Path(out).resolve().parent)
        if outside:
            print(f"note: {out} names local data outside its folder ({', '.join(outside)}); "
                  "load it with --allow-paths-outside (Suite.from_file(..., allow_paths_outside=True))",
                  file=sys.stderr)
    if out is not None and Path(out).suffix.lower() == ".json":
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    elif out is None or Path(out).suffix.lower() in (".yaml", ".yml"):
        text = yaml_text(data)
    else:
        raise CliError(f"{out}: unsupported manifest file type; use .yaml, .yml or .json")
    if out is None:
        sys.stdout.write(text)
        return 0
    _write_text(out, text)
    noun = "task" if len(suite.tasks) == 1 else "tasks"
    print(f"{out}: {len(suite.tasks)} {noun} ({', '.join(t.id for t in suite.tasks)}); "
          f"suite version {suite.version[:12]}")
    return 0


def _relative_dataset_paths(data: dict, folder: Path) -> list[str]:
    """Write local dataset folders inside the manifest's `folder` relative to it (a manifest file
    may only name files in its own folder); return those that stay outside it."""
    outside = []
    for task in data.get("tasks", []):
        for dataset in (task.get("dataset"), (task.get("fewshot") or {}).get("dataset")):
            path = (dataset or {}).get("path")
            if not isinstance(path, str) or not Path(path).is_absolute() or not Path(path).exists():
                continue
            try:
                dataset["path"] = Path(path).resolve().relative_to(folder).as_posix()
            except ValueError:
                outside.append(path)
    return sorted(set(outside))


def _allow_paths_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-paths-outside", action="store_true",
                        help="let the manifest's local dataset and few-shot paths leave its folder "
                             "(absolute, ~, ..); only for a manifest you trust")


def _load_suite(path: str, allow_paths_outside: bool = False) -> Suite:
    """The suite in `path`, or every manifest problem on stderr and exit 1."""
    from evalnb.suite import Suite

    file = Path(path)
    if not file.exists():
        raise CliError(f"{path}: no such file")
    if not file.is_file():
        raise CliError(f"{path}: not a file")
    try:
        return Suite.from_file(file, allow_paths_outside=allow_paths_outside)
    except ManifestError as exc:
        noun = "problem" if len(exc.errors) == 1 else "problems"
        lines = [f"{path}: invalid manifest ({len(exc.errors)} {noun})"]
        lines += [f"{e['loc']}: {e['msg']}" if e.get("loc") else str(e["msg"]) for e in exc.errors]
        raise CliError("\n".join(lines)) from None


def cmd_preview(args: argparse.Namespace) -> int:
    suite = _load_suite(args.file, args.allow_paths_outside)
    task = suite.task(args.task) if args.task else suite.tasks[0]
    items = suite.items(task.id, limit=args.index + args.limit)
    if args.index >= len(items):
        span = f"indexes 0-{len(items) - 1}" if items else "no items"
        raise CliError(f"task {task.id!r} has {len(items)} item(s) ({span}); --index {args.index} is out of range")
    fewshot = task.effective_fewshot
    row_name = "few-shot dataset row" if fewshot is not None and fewshot.dataset is not None else "row"
    blocks = []
    for item in items[args.index:]:
        lines = [f"=== task {task.id} ({task.type}), item {item.index} ==="]
        if args.raw:
            lines += ["--- prompt (exactly as sent) ---", item.prompt]
        else:
            for n, shot in enumerate(item.fewshot, 1):
                lines += [f"--- example {n} ({row_name} {shot.row_index}) ---", shot.text]
            lines += [f"--- prompt (row {item.index}) ---", item.question]
        lines += ["--- target ---", item.target]
        if item.choices is not None:
            lines += ["--- choices ---", *item.choices]
        lines += ["--- row ---", json.dumps(item.row, indent=2, ensure_ascii=False, default=str)]
        blocks.append("\n".join(lines))
    print("\n\n".join(blocks))
    return 0


# ---- run ------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from evalnb.runner.api import run

    suite = _load_suite(args.file, args.allow_paths_outside)
    given = [(spec, *_model_and_globals(spec, args, "model")) for spec in args.model]
    for spec, what in ((args.judge_model, "judge_model"), (args.embedding_model, "embedding_model")):
        if spec:
            given.append((spec, *_model_and_globals(spec, args, what)))
    _check_global_flags(given)
    models = [m for _, m, _ in given[:len(args.model)]]
    judge = _model(args.judge_model, args, "judge_model") if args.judge_model else None
    embedding = _model(args.embedding_model, args, "embedding_model") if args.embedding_model else None
    prices = args.price
    if args.batch_discount is not None:
        if not prices:
            raise CliError("--batch-discount needs --price: it is a factor on a model's price")
        prices = [(name, {**price, "batch_discount": args.batch_discount}) for name, price in prices]
    models, judge, embedding = _priced(prices, models, judge, embedding)
    _check_keys([m for m in (*models, judge, embedding) if m is not None])
    return _finish(_interruptible(lambda: run(
        suite, models, generation=args.generation, concurrency=args.concurrency, task_ids=args.task,
        max_samples=args.max_samples, judge_model=judge, embedding_model=embedding,
        reuse=not args.no_reuse, progress=False if args.no_progress else "text", epochs=args.epochs,
        name=args.name, judge_generation=args.judge_generation, max_cost_usd=args.max_cost_usd,
        executor=args.executor, store=_STORE_FILE[0], variants=_variants(args.variant),
    )), args)


def _variants(given: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    names = [name for name, _ in given]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CliError(f"--variant {repeated[0]}=...: given more than once")
    return dict(given) or None


def _priced(prices: list[tuple[str, dict[str, float]]], models: list[Model], judge: Model | None,
            embedding: Model | None) -> tuple[list[Model], Model | None, Model | None]:
    """Give each ``--price NAME=...`` to the models with that name (or label); unknown names are an error."""
    from dataclasses import replace

    given = dict(prices)
    every = [m for m in (*models, judge, embedding) if m is not None]
    unknown = [name for name in given if not any(name in (m.name, m.label) for m in every)]
    if unknown:
        raise CliError(f"--price {unknown[0]}=...: no model of that name (models: "
                       f"{', '.join(dict.fromkeys(m.name for m in every))})")

    def apply(m: Model | None) -> Model | None:
        if m is None:
            return None
        price = given.get(m.label, given.get(m.name))
        return replace(m, price=price) if price is not None else m

    return [apply(m) for m in models], apply(judge), apply(embedding)  # type: ignore[misc]


def cmd_resume(args: argparse.Namespace) -> int:
    from evalnb.runner.api import resume

    with _open_store() as store:
        run_id = _find_run(store, args.run_id)
    budget = {} if args.max_cost_usd is None else {"max_cost_usd": args.max_cost_usd}
    given = _resume_models(args)
    return _finish(_interruptible(lambda: resume(run_id, concurrency=args.concurrency, force=args.force,
                                                 progress=False if args.no_progress else "text",
                                                 retry_failed=args.retry_failed, store=_STORE_FILE[0],
                                                 trust_stored_models=args.models_from_store,
                                                 allow_paths_outside=args.allow_paths_outside, **given,
                                                 **budget)), args)


def _resume_models(args: argparse.Namespace) -> dict[str, Any]:
    """``resume``'s ``models=`` / ``judge_model=`` / ``embedding_model=`` from ``--model`` and the
    others, in `evalnb run`'s per-model form (no global --api/--api-key-env/--base-url here)."""
    plain = argparse.Namespace(api=None, api_key_env=None, base_url=None)
    models = [_model(spec, plain, "model") for spec in args.model or []]
    judge = _model(args.judge_model, plain, "judge_model") if args.judge_model else None
    embedding = _model(args.embedding_model, plain, "embedding_model") if args.embedding_model else None
    if args.price and not (models or judge or embedding):
        raise CliError("--price names a model given with --model, --judge-model or --embedding-model")
    models, judge, embedding = _priced(args.price, models, judge, embedding)
    _check_keys([m for m in (*models, judge, embedding) if m is not None])
    given = {"models": models or None, "judge_model": judge, "embedding_model": embedding}
    return {k: v for k, v in given.items() if v is not None}


def cmd_cancel(args: argparse.Namespace) -> int:
    from evalnb.runner.api import cancel

    with _open_store() as store:
        run_id = _find_run(store, args.run_id)
        batches = cancel(run_id, store=store)
    if not batches:
        _err(f"run {run_id} has no provider batches (only runs made with --executor batch have)")
        return 1
    for batch in batches:
        print(f"{batch['id']}  {batch['model']}  {batch['status']}")
    print(f"run_id: {run_id}: `evalnb resume {run_id}` keeps what was answered and sends the rest again")
    return 0


def _interruptible(start: Any) -> tuple[RunResult, BaseException | None]:
    """The run's result, or — Ctrl-C: the run saved what finished — that partial run and the interrupt."""
    from evalnb.runner.api import load_run

    try:
        return start(), None
    except KeyboardInterrupt as stopped:
        if getattr(stopped, "run_id", None) is None:
            raise
        return load_run(stopped.run_id, store=_STORE_FILE[0]), stopped


def _finish(outcome: tuple[RunResult, BaseException | None], args: argparse.Namespace) -> int:
    """Print a finished (or interrupted) run's metrics and outcome; the exit code says how it went."""
    result, interrupted = outcome
    _print_metrics(result)
    if result.epochs > 1:
        print(f"epochs: {result.epochs} (n counts items; an item's score is its mean over its epochs)")
    counts = result.run.get("counts") or {}
    failed = int(counts.get("failed") or 0)
    not_run = int(counts.get("not_run") or 0)
    _print_cost(result)
    print(f"run_id: {result.run_id}  status: {result.status}  samples: {counts.get('total', 0)}  failed: {failed}"
          + (f"  not run: {not_run}" if not_run else ""))
    shown = not getattr(args, "no_progress", False)  # the progress display said the reasons already
    if result.status == "stopped":
        _err(f"{result.run.get('error') or 'stopped by its budget'}; CLI: evalnb resume {result.run_id} --max-cost-usd USD")
    elif result.run.get("error") and not shown:
        _err(f"run error: {_error_without_reasons(result.run['error'])}")
    if failed or not_run:
        _report_failures(result, failed, not_run, reasons_shown=shown)
    if interrupted is not None:
        _err(f"interrupted: {interrupted}; `evalnb resume {result.run_id}` (or the same `evalnb run`) continues it")
        return 130
    if result.status == "cancelled":
        return 130
    if result.status == "stopped":
        return 1
    if result.status != "completed" or (failed and not args.allow_failures):
        return 1
    return 0


MODEL_OPTIONS = ("api", "label", "base_url", "api_key_env")  # NAME[@URL],key=value,... (see _model)
# The APIs evalnb.Model takes: the CLI accepts each, so a log-likelihood task (api="completions")
# runs from the command line as from Python.
MODEL_APIS = ("responses", "chat", "completions")  # evalnb.providers.model.APIS, not imported: `evalnb --help` stays light


def _model(spec: str, args: argparse.Namespace, what: str) -> Model:
    """``NAME[@BASE_URL][,api=chat][,label=X][,base_url=URL][,api_key_env=VAR]`` as a Model.

    A bare NAME is OpenAI's (as `evalnb.Model`), or at the global ``--base-url``. The options
    after the first comma belong to this model alone; the global ``--api`` / ``--api-key-env`` /
    ``--base-url`` apply to the models that do not set their own (`_check_global_flags` refuses
    them across hosts). So one run can compare a server's chat and Responses endpoints:
    ``--model m@URL,api=chat,label=m-chat --model m@URL,label=m-responses``.
    """
    return _model_and_globals(spec, args, what)[0]


def _model_and_globals(spec: str, args: argparse.Namespace, what: str) -> tuple[Model, set[str]]:
    """The model of a ``--model`` spec and which global flags it takes (``api``, ``api_key_env``, ``base_url``)."""
    from dataclasses import replace

    from evalnb.runner.run_plan import as_model

    head, *rest = spec.split(",")
    options: dict[str, str] = {}
    for part in rest:
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in MODEL_OPTIONS or not value.strip():
            raise CliError(f"--{what.replace('_', '-')} {spec}: {part!r} is not one of "
                           f"{', '.join(k + '=...' for k in MODEL_OPTIONS)} (write NAME[@BASE_URL][,api=chat][,label=X])")
        if key in options:
            raise CliError(f"--{what.replace('_', '-')} {spec}: {key}= is given twice")
        options[key] = value.strip()
    taken: set[str] = set()
    if "base_url" in options:
        if "@" in head:
            raise CliError(f"--{what.replace('_', '-')} {spec}: give the base URL once (NAME@URL or base_url=URL)")
        head = f"{head}@{options.pop('base_url')}"
    elif "@" not in head and getattr(args, "base_url", None):
        head = f"{head}@{args.base_url}"
        taken.add("base_url")
    if options.get("api") not in (None, *MODEL_APIS):
        raise CliError(f"--{what.replace('_', '-')} {spec}: api must be responses, chat or completions, "
                       f"got {options['api']!r}")
    model = as_model(head, what, bare=True)
    changes: dict[str, Any] = {}
    api = options.get("api") or args.api
    if api and what != "embedding_model":  # embeddings have one endpoint whatever the API
        changes["api"] = api
        if "api" not in options:
            taken.add("api")
    key_env = options.get("api_key_env") or args.api_key_env
    if key_env:
        changes["api_key_env"] = key_env
        if "api_key_env" not in options:
            taken.add("api_key_env")
    if "label" in options:
        changes["label"] = options["label"]
    return (replace(model, **changes) if changes else model), taken


def _check_global_flags(given: list[tuple[str, Model, set[str]]]) -> None:
    """``--api``, ``--api-key-env`` and ``--base-url`` given once hold for one host only.

    Applied to models on different hosts, one model's key would be sent to another's server
    (``--model gpt-4.1-mini --model qwen@http://localhost:8000/v1 --api-key-env VLLM_API_KEY``
    would send the vLLM key to OpenAI). Refused, with the per-model form that says it exactly.
    """
    from urllib.parse import urlsplit

    for flag in ("api_key_env", "api", "base_url"):
        takers = [(spec, m) for spec, m, taken in given if flag in taken]
        hosts = {urlsplit(str(m.base_url)).netloc for _, m in takers}
        if len(hosts) > 1:
            option = "--" + flag.replace("_", "-")
            raise CliError(
                f"{option} is given once but would apply to models on {len(hosts)} hosts "
                f"({', '.join(sorted(hosts))}): a key or setting meant for one server would go to another. "
                f"Give it per model instead (options after a comma: {', '.join(k + '=' for k in MODEL_OPTIONS)}), "
                "e.g. --model qwen@http://localhost:8000/v1,api=chat,api_key_env=VLLM_API_KEY,label=qwen")


def _check_keys(models: list[Model]) -> None:
    """Fail before the run, not with a 401 per sample, when a key's variable is unset."""
    from evalnb.runner.fail_fast import missing_keys

    problem = missing_keys(models)
    if problem:
        raise CliError(problem)


def _report_failures(result: RunResult, failed: int, not_run: int = 0, *, reasons_shown: bool = False) -> None:
    """Each reason once: with counts (unless the progress display printed them), then where to
    look; the failed samples are named by place, not by repeating their message."""
    what = f"{failed} sample(s) failed" + (f", {not_run} not run" if not_run else "")
    error = _error_without_reasons(str(result.run.get("error") or ""))
    from evalnb.runner.progress import said_before

    # not again what the progress display or the run error (a model's stop) quoted
    reasons = [] if reasons_shown else [(r, n) for r, n in result.failure_reasons() if not said_before(r, [error])]
    if reasons:
        _err(f"{what}; the commonest reasons:")
        for reason, n in reasons:
            print(f"  {n} x {_one_line(reason)}", file=sys.stderr)
    else:
        _err(f"{what} (the reasons are above)")
    if failed:
        frame = result.samples
        bad = frame[frame["status"] == "failed"].head(3)
        places = ", ".join(f"{r['task_id']} / {r['model']} #{r['sample_index']}" for r in bad.to_dict("records"))
        print(f"  e.g. {places}; see: evalnb show {result.run_id} --samples --failed", file=sys.stderr)
    if result.status in ("failed", "cancelled"):
        print(f"  `evalnb resume {result.run_id}` sends the failed and not-run samples again", file=sys.stderr)


def _error_without_reasons(error: str) -> str:
    """A run's error without the parts the reasons list says (``top reasons: ...``, the resume hint)."""
    error = error.split("; top reasons: ", 1)[0]
    return _one_line(error.split("; evalnb.resume(", 1)[0])


# ---- runs, show, export -------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> int:
    store = _open_store(required=False)
    if store is None:
        _err(f"no runs in {_home()} (no store there yet)")
        return 0
    with store:
        frame = store.list_runs(limit=args.limit + 1 if args.limit else None)
    if frame.empty:
        _err(f"no runs in {_home()}")
        return 0
    more = bool(args.limit) and len(frame) > args.limit
    rows = [
        [r["run_id"], r["status"], r["created_at"].strftime("%Y-%m-%d %H:%M:%S"), str(r["suite_version"])[:12],
         r["models"], _done_of_planned(r), str(r["n_failed"]), r["name"] or ""]
        for r in frame.head(args.limit or None).to_dict("records")
    ]
    headers = ["run_id", "status", "created (UTC)", "suite", "models", "done/planned", "failed", "name"]
    print("\n".join(_table(headers, rows, right={5, 6})))
    if more:
        _err(f"showing the newest {args.limit}; --limit 0 lists all")
    return 0


def _done_of_planned(row: dict[str, Any]) -> str:
    """``20/120``: samples stored of samples planned (``20/?`` for a run recorded before plans were)."""
    planned = row.get("n_planned")
    return f"{row['n_samples']}/{'?' if _missing(planned) else int(planned)}"


def cmd_show(args: argparse.Namespace) -> int:
    from evalnb.results.run_result import RunResult

    store = _open_store()
    with store:
        result = RunResult(store, _find_run(store, args.run_id))
        run = result.run
        counts = run.get("counts") or {}
        head = [
            ["run", str(result.run_id)],
            *([["name", result.name]] if result.name else []),
            ["status", f"{result.status} ({counts.get('total', 0)} samples, {counts.get('failed', 0)} failed)"],
            ["suite", str(run.get("suite_version") or "")[:12]],
            ["models", ", ".join(result.models)],
            ["created", _when(run.get("created_at"))],
        ]
        if run.get("generation"):
            head.append(["generation", json.dumps(run["generation"], sort_keys=True)])
        if run.get("error"):
            head.append(["error", _one_line(run["error"])])
        print("\n".join(_table(None, head)) + "\n")
        _print_metrics(result)
        _print_cost(result, table=True)
        if args.samples:
            print()
            _print_samples(result, failed_only=args.failed, limit=args.limit)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from evalnb.results.run_result import RunResult

    fmt = args.format or _format_of(args.output) or "jsonl"
    if fmt == "parquet" and args.output == "-":
        raise CliError("parquet cannot go to stdout; give -o PATH")
    store = _open_store()
    with store:
        result = RunResult(store, _find_run(store, args.run_id))
        out = args.output or f"{result.run_id}.{args.what}.{fmt}"
        if fmt == "jsonl":
            records = result.to_records(args.what)
            text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
            n = len(records)
            _write_text(out, text)
        else:
            frame = _flat(getattr(result, args.what))
            n = len(frame)
            if fmt == "csv":
                _write_text(out, frame.to_csv(index=False))
            else:
                try:
                    frame.to_parquet(out, index=False)
                except ImportError as exc:
                    raise CliError(f"parquet export needs pyarrow ({exc}); pip install pyarrow") from None
    print(f"wrote {n} {args.what} rows to {'stdout' if out == '-' else out}", file=sys.stderr if out == "-" else sys.stdout)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    if args.source.endswith(".ipynb"):
        from evalnb.reporting.notebook import notebook_report

        if args.baseline:
            raise CliError("--baseline is for a run report; a notebook report shows what the notebook shows")
        if not Path(args.source).is_file():
            raise CliError(f"no notebook at {args.source}")
        try:
            out = notebook_report(args.source, args.output or f"{Path(args.source).stem}.html", execute=args.execute,
                                  interactive=args.interactive)
        except ImportError as exc:
            raise CliError(str(exc)) from None
    else:
        from evalnb.reporting.run_page import write_run_report
        from evalnb.results.run_result import RunResult

        if args.execute:
            raise CliError("--execute is for a notebook; a run report reads the stored run")
        if args.interactive:
            raise CliError("--interactive is for a notebook report; a run report's charts are pictures")
        store = _open_store()
        with store:
            result = RunResult(store, _find_run(store, args.source))
            baseline = RunResult(store, _find_run(store, args.baseline)) if args.baseline else None
            out = write_run_report(result, args.output or f"{result.run_id}.html", baseline=baseline)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.1f} MB)" if size >= 1e6 else f"wrote {out} ({size / 1e3:.0f} kB)")
    return 0


def _format_of(path: str | None) -> str | None:
    suffix = Path(path).suffix.lower().lstrip(".") if path and path != "-" else ""
    return {"jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv", "parquet": "parquet", "pq": "parquet"}.get(suffix)


def _write_text(out: str, text: str) -> None:
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")


def _flat(frame: pd.DataFrame) -> pd.DataFrame:
    """Dict and list cells (dataset_row, judge) as JSON text: CSV and Parquet need flat columns."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object and frame[column].map(lambda v: isinstance(v, (dict, list))).any():
            frame[column] = frame[column].map(
                lambda v: json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, (dict, list)) else v
            )
    return frame


def _home() -> Path:
    # The rule of evalnb.home.evalnb_home(), without creating the folder: reading commands
    # run in the wrong directory should not leave an empty .evalnb behind.
    return Path(os.environ.get("EVALNB_HOME") or ".evalnb").expanduser().resolve()


_STORE_FILE: list[Path | None] = [None]  # --store FILE of the command being run


def _open_store(required: bool = True) -> Store | None:
    from evalnb.store import Store

    if _STORE_FILE[0] is not None:
        if not _STORE_FILE[0].is_file():
            raise CliError(f"--store {_STORE_FILE[0]}: no such file")
        return Store(_STORE_FILE[0])
    path = _home() / "evalnb.sqlite"
    if path.is_file():
        return Store(path)
    if required:
        raise CliError(f"no evalnb store at {path}; use --home DIR (or EVALNB_HOME) for the folder your runs are in")
    return None


def _find_run(store: Store, ref: str) -> str:
    """A run id from an id, 'latest', or a unique prefix/suffix (the progress line shows the last 8)."""
    from evalnb.store import UnknownRunError

    try:
        return store.get_run(ref)["run_id"]
    except UnknownRunError:
        pass
    ids = list(store.list_runs()["run_id"])
    if ref == "latest" and ids:
        return ids[0]
    matches = [i for i in ids if len(ref) >= 4 and (i.startswith(ref) or i.endswith(ref))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise CliError(f"run id {ref!r} is ambiguous: it matches {', '.join(matches[:5])}")
    raise CliError(f"unknown run {ref!r} in {store.path}; `evalnb runs` lists the stored runs")


# ---- tables -------------------------------------------------------------------------------


def _print_metrics(result: RunResult) -> None:
    metrics = result.metrics
    not_run = "n_not_run" in metrics.columns and bool(metrics["n_not_run"].any())
    rows, errors, missing = [], {}, {}
    for r in metrics.to_dict("records"):
        ci = f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]" if not math.isnan(r["ci_low"]) else "-"
        rows.append([r["task_id"], r["model"] + (f" · {r['variant']}" if r.get("variant") else ""), r["metric"], str(r["n"]), str(r["n_failed"]), str(r["n_unscored"]),
                     _num(r["mean"]), ci, *([str(r["n_not_run"])] if not_run else [])])
        if not _missing(r.get("error")):
            errors[(r["task_id"], r["model"])] = r["error"]
        if r["n_missing_field"]:
            missing[(r["task_id"], r["model"])] = r["n_missing_field"]
    if rows:
        headers = ["task", "model", "metric", "n", "n_failed", "n_unscored", "mean", "95% CI",
                   *(["n_not_run"] if not_run else [])]
        print("\n".join(_table(headers, rows, right={3, 4, 5, 6, 8})))
    else:
        print("(no metrics)")
    for (task, model), error in errors.items():
        print(f"error: task {task}, model {model}: {_one_line(error)}")
    for (task, model), n in missing.items():
        print(f"note: task {task}, model {model}: {n} prompt(s) had a template field their row lacks "
              '(rendered as ""; n_missing_field)')


def _print_cost(result: RunResult, *, table: bool = False) -> None:
    """The run's spend (with a table per task, model and role for `show`), when anything was priced or cached."""
    costs = result.costs
    if costs.empty or (costs["cost_usd"].isna().all() and not costs["cached"].any()):
        return
    known = costs["cost_usd"].notna()
    total = float(costs["cost_usd"].fillna(0.0).sum())
    unpriced = "" if known.all() else " (some calls had no price: not counted)"
    if table:
        rows = [[r["task_id"], r["model"], r["role"], r["billed_model"], str(r["calls"]), str(r["cached"]),
                 f"{r['input_tokens']:,}", f"{r['output_tokens']:,}",
                 "-" if math.isnan(r["cost_usd"]) else f"${r['cost_usd']:.4f}"] for r in costs.to_dict("records")]
        headers = ["task", "model", "role", "billed as", "calls", "cached", "input tok", "output tok", "cost"]
        print()
        print("\n".join(_table(headers, rows, right={4, 5, 6, 7, 8})))
    print(f"cost: ${total:.4f}{unpriced}")


def _print_samples(result: RunResult, *, failed_only: bool, limit: int) -> None:
    frame = result.samples
    if failed_only:
        frame = frame[frame["status"] == "failed"]
    total = len(frame)
    if limit:
        frame = frame.head(limit)
    columns = result.metric_columns
    rows = []
    for r in frame.to_dict("records"):
        scores = ", ".join(
            f"{metric}={_score(r[column])}" for metric, column in columns.items()
            if isinstance(r.get(column), float) and not math.isnan(r[column])
        )
        extracted, error = r["extracted_output"], r["error"]
        rows.append([
            r["task_id"], r["model"], str(r["sample_index"]), r["status"],
            "-" if _missing(extracted) else json.dumps(extracted, ensure_ascii=False),
            scores, "" if _missing(error) else _one_line(error),
        ])
    if not rows:
        print("(no failed samples)" if failed_only else "(no samples)")
        return
    headers = ["task", "model", "index", "status", "extracted", "scores", "error"]
    width = shutil.get_terminal_size((120, 24)).columns
    print("\n".join(line[:width] for line in _table(headers, rows, right={2}, width=width, flexible=(4, 5, 6))))
    if total > len(rows):
        print(f"({total - len(rows)} more; --limit 0 shows all)")
    for r in frame.to_dict("records"):  # what the grader printed for a failed sample, whole
        if r["status"] == "failed" and not _missing(r.get("log")) and r.get("log"):
            print(f"\n--- grader output of {r['task_id']} / {r['model']} #{r['sample_index']} ---")
            print(r["log"], end="" if r["log"].endswith("\n") else "\n")


def _table(
    headers: list[str] | None,
    rows: list[list[str]],
    *,
    right: set[int] = frozenset(),  # type: ignore[assignment]
    width: int | None = None,
    flexible: tuple[int, ...] = (),
) -> list[str]:
    """A plain aligned table; `flexible` columns shrink (with an ellipsis) to fit `width`."""
    grid = ([headers] if headers else []) + rows
    widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
    if width is not None and flexible:
        widths = _fit(widths, flexible, width, minimum=[len(headers[i]) if headers else 1 for i in range(len(widths))])
    lines = []
    for n, r in enumerate(grid):
        cells = [_clip(c, w) for c, w in zip(r, widths)]
        lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
        if n == 0 and headers:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _fit(widths: list[int], flexible: tuple[int, ...], width: int, minimum: list[int]) -> list[int]:
    widths = list(widths)
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    while excess > 0:
        i = max(flexible, key=lambda j: widths[j] - max(minimum[j], 6))
        if widths[i] <= max(minimum[i], 6):
            break
        widths[i] -= 1
        excess -= 1
    return widths


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA (a string column holds NaN for a missing value)."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ == "NAType"


def _one_line(value: Any) -> str:
    return " ".join(str(value).split())


def _num(x: float) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.4f}" if abs(x) < 1e5 else f"{x:.4e}"


def _score(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.4g}"


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _err(message: str) -> None:
    print(f"evalnb: {message}", file=sys.stderr)
