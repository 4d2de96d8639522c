"""The ``!function`` hooks of an imported lm-eval task, loaded in the sandbox from carried sources.

Self-contained (standard library only): its source goes first in the preprocessor and the
grader an lm-eval task carries (`evalnb.suite.lm_eval_import`), followed by ``MODULES`` (the
source of each ``utils.py`` the task's hooks name). A hook is data in the task's settings,
``{"function": "utils.process_docs"}``; `hook` turns it into the function.
"""

import hashlib
import sys
import types

MODULES = {}  # module name -> source of the task's utils files (replaced by the importer)
_FUNCTIONS = {}


def function(ref):
    """A ``!function module.name`` hook, loaded from the source carried in MODULES."""
    fn = _FUNCTIONS.get(ref)
    if fn is not None:
        return fn
    module_name, _, name = ref.rpartition(".")
    if module_name not in MODULES:
        raise RuntimeError(f"!function {ref}: the source of {module_name}.py was not carried into the manifest")
    source = MODULES[module_name]
    # a sandbox worker runs many tasks' code: two tasks' utils.py are two modules
    key = "lm_eval_task_%s_%s" % (module_name, hashlib.sha256(source.encode("utf-8")).hexdigest()[:16])
    module = sys.modules.get(key)
    if module is None:
        module = types.ModuleType(module_name)
        module.__file__ = f"<lm-eval {module_name}.py>"
        sys.modules[key] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102
    fn = _FUNCTIONS[ref] = getattr(module, name)
    return fn


def hook(spec):
    """A config value: a {"function": ref} marker becomes the function, anything else stays."""
    if isinstance(spec, dict) and set(spec) == {"function"}:
        return function(spec["function"])
    return spec
