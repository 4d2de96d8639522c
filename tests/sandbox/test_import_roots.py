"""Only import roots in view: an editable project's ``.env`` stays hidden (issue 31 item 2).

A project installed the way hatchling, poetry and setuptools' compat mode install it (a
``.pth`` file naming the project folder) and one installed through an editable finder
(setuptools' ``__editable___*_finder.py`` mapping a name to a folder) sit in a fresh venv of
the system interpreter, each with a ``.env``, a ``.git`` folder, a notebook and data beside
its package. A grader imports both packages (that works) and tries to read everything beside
them; judged from the caller's side by what the grader returned. As root and as ``nobody``.
The control (the worker's own root off) reads the ``.env``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import evalnb

LINUX = sys.platform.startswith("linux")
ROOT = LINUX and os.getuid() == 0
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
pytestmark = pytest.mark.skipif(not LINUX or SYSTEM_PYTHON is None, reason="Linux, and a system python3 for the venv")

GRADER = r'''
import os

def grade(sample, item):
    seen = {}
    import shown_pkg, mapped_pkg
    seen["imports"] = [shown_pkg.VALUE, mapped_pkg.VALUE]
    for project in item["projects"]:
        for name in (".env", ".git/config", "notes.ipynb", "data/rows.csv", "settings.py.bak"):
            try:
                seen[os.path.join(project, name)] = open(os.path.join(project, name)).read()
            except OSError as exc:
                seen[os.path.join(project, name)] = type(exc).__name__
        try:
            seen[project + " listing"] = sorted(os.listdir(project))
        except OSError as exc:
            seen[project + " listing"] = type(exc).__name__
    return {"scores": {"score": 1}, "judge": seen}
'''

CALLER = r'''
import json, sys
from evalnb.sandbox import Job, SandboxPool, UserCode
grader, projects, filesystem = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "on"
with SandboxPool(1, filesystem=filesystem) as pool:
    (res,) = pool.run_sync(Job(UserCode(grader, "g.py"), names=("grade",), nargs=2), [[{}, {"projects": projects}]])
    print(json.dumps({"value": res.value, "error": res.error, "isolation": pool.isolation}))
'''

FINDER = r'''
import importlib.util, sys
MAPPING = {"mapped_pkg": %r}
class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name in MAPPING:
            return importlib.util.spec_from_file_location(name, MAPPING[name] + "/__init__.py",
                                                          submodule_search_locations=[MAPPING[name]])
        return None
def install():
    sys.meta_path.append(_Finder)
'''


def _project(folder: Path, package: str, secret: str) -> None:
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text(f"VALUE = {package!r}\n")
    (folder / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text(f"[remote] token = {secret}\n")
    (folder / "notes.ipynb").write_text(json.dumps({"cells": [{"source": secret}]}))
    (folder / "data").mkdir()
    (folder / "data" / "rows.csv").write_text(f"q,a\n{secret},1\n")
    (folder / "settings.py.bak").write_text(secret)


def _open_to_all(base: Path) -> None:
    for path in [base, *base.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not path.is_symlink():
            path.chmod(mode | 0o755 if path.is_dir() else mode | 0o644)


@pytest.fixture
def installed(tmp_path_factory):
    """A venv of the system python with a .pth-installed project and a finder-installed one."""
    base = Path(f"/tmp/evalnb-roots-{secrets.token_hex(4)}")
    base.mkdir()
    secret = "sk-dotenv-" + secrets.token_hex(12)
    shown, mapped = base / "shown", base / "mapped"
    _project(shown, "shown_pkg", secret)
    _project(mapped, "mapped_pkg", secret)
    venv = base / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "_shown_pkg.pth").write_text(f"{shown}\n")  # as hatchling and poetry write it
    (site / "__editable___mapped_pkg_0_1_finder.py").write_text(FINDER % str(mapped / "mapped_pkg"))
    (site / "__editable__.mapped_pkg-0.1.pth").write_text(
        "import __editable___mapped_pkg_0_1_finder; __editable___mapped_pkg_0_1_finder.install()\n")
    lib = base / "lib"
    shutil.copytree(Path(evalnb.__file__).parent, lib / "evalnb", ignore=shutil.ignore_patterns("__pycache__"))
    _open_to_all(base)
    yield {"python": str(venv / "bin" / "python"), "lib": str(lib), "projects": [str(shown), str(mapped)],
           "secret": secret}
    shutil.rmtree(base, ignore_errors=True)


def _attack(installed: dict, *, filesystem: bool, user: int | None) -> dict:
    done = subprocess.run([installed["python"], "-c", CALLER, GRADER, json.dumps(installed["projects"]),
                           "on" if filesystem else "off"],
                          env={"PATH": os.defpath, "PYTHONPATH": installed["lib"]}, cwd="/", user=user, group=user,
                          extra_groups=[] if user is not None else None, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


USERS = [pytest.param(None, id="caller"),
         pytest.param(65534, id="nobody", marks=pytest.mark.skipif(not ROOT, reason="needs root to become nobody"))]


@pytest.mark.parametrize("user", USERS)
def test_a_grader_imports_an_editable_package_but_reads_nothing_beside_it(installed, user):
    out = _attack(installed, filesystem=True, user=user)
    assert out["error"] is None, out["error"]
    assert out["isolation"]["filesystem"], out["isolation"]
    seen = out["value"]["judge"]
    assert seen["imports"] == ["shown_pkg", "mapped_pkg"]  # the packages are in view
    assert installed["secret"] not in json.dumps(out)
    for project in installed["projects"]:
        assert seen[f"{project}/.env"] == "FileNotFoundError", seen
        assert seen[project + " listing"] in ([], [Path(project).name + "_pkg"], ["shown_pkg"], ["mapped_pkg"]), seen


@pytest.mark.parametrize("user", USERS)
def test_control_without_the_own_root_the_dotenv_is_read(installed, user):
    out = _attack(installed, filesystem=False, user=user)
    seen = out["value"]["judge"]
    assert seen[f"{installed['projects'][0]}/.env"] == f"OPENAI_API_KEY={installed['secret']}\n"


LOOSE_GRADER = r'''
import os

def grade(sample, item):
    import loose_pkg, data.prep, notebooks.helpers
    seen = {"imports": [loose_pkg.VALUE, data.prep.VALUE, notebooks.helpers.VALUE]}
    project = item["projects"][0]
    for name in ("data/rows.csv", "notebooks/analysis.ipynb", "dotenv.py", ".env", "home/.netrc", "netrc.py"):
        try:
            seen[name] = open(os.path.join(project, name)).read()
        except OSError as exc:
            seen[name] = type(exc).__name__
    return {"scores": {"score": 1}, "judge": seen}
'''


@pytest.fixture
def loose(tmp_path_factory):
    """A .pth project whose folders without __init__.py hold a module beside secrets, and
    symlinks named like modules that point at its .env and at a home folder outside it."""
    base = Path(f"/tmp/evalnb-roots-{secrets.token_hex(4)}")
    base.mkdir()
    secret = "sk-loose-" + secrets.token_hex(12)
    project, home = base / "project", base / "home"
    (project / "loose_pkg").mkdir(parents=True)
    (project / "loose_pkg" / "__init__.py").write_text("VALUE = 'loose_pkg'\n")
    (project / "data").mkdir()
    (project / "data" / "prep.py").write_text("VALUE = 'prep'\n")
    (project / "data" / "rows.csv").write_text(f"q,a\n{secret},1\n")
    (project / "notebooks").mkdir()
    (project / "notebooks" / "helpers.py").write_text("VALUE = 'helpers'\n")
    (project / "notebooks" / "analysis.ipynb").write_text(json.dumps({"cells": [{"source": secret}]}))
    (project / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    home.mkdir()
    (home / ".netrc").write_text(f"machine api password {secret}\n")
    (home / "scratch.py").write_text("")
    os.symlink(project / ".env", project / "dotenv.py")
    os.symlink(home / ".netrc", project / "netrc.py")
    os.symlink(home, project / "home")
    venv = base / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "_loose.pth").write_text(f"{project}\n")
    lib = base / "lib"
    shutil.copytree(Path(evalnb.__file__).parent, lib / "evalnb", ignore=shutil.ignore_patterns("__pycache__"))
    _open_to_all(base)
    yield {"python": str(venv / "bin" / "python"), "lib": str(lib), "projects": [str(project)], "secret": secret}
    shutil.rmtree(base, ignore_errors=True)


def _attack_with(installed: dict, grader: str, *, filesystem: bool, user: int | None) -> dict:
    done = subprocess.run([installed["python"], "-c", CALLER, grader, json.dumps(installed["projects"]),
                           "on" if filesystem else "off"],
                          env={"PATH": os.defpath, "PYTHONPATH": installed["lib"]}, cwd="/", user=user, group=user,
                          extra_groups=[] if user is not None else None, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("user", USERS)
def test_folders_without_init_and_symlinks_bring_no_secret_into_view(loose, user):
    """``data/`` and ``notebooks/`` hold a module each (importable: namespace packages) but only
    the modules are in view; ``dotenv.py -> .env``, ``netrc.py`` and ``home`` lead nowhere."""
    out = _attack_with(loose, LOOSE_GRADER, filesystem=True, user=user)
    assert out["error"] is None, out["error"]
    seen = out["value"]["judge"]
    assert seen["imports"] == ["loose_pkg", "prep", "helpers"]
    assert loose["secret"] not in json.dumps(out), seen
    assert all(v in ("FileNotFoundError", "PermissionError") for k, v in seen.items() if k != "imports"), seen
    assert not any(".env" in p or "/home" in p or p.endswith(("/data", "/notebooks")) for p in out["isolation"]["read_only"])


@pytest.mark.parametrize("user", USERS)
def test_control_without_the_own_root_the_folders_and_symlinks_are_read(loose, user):
    out = _attack_with(loose, LOOSE_GRADER, filesystem=False, user=user)
    seen = out["value"]["judge"]
    assert all(loose["secret"] in seen[k] for k in ("data/rows.csv", "notebooks/analysis.ipynb", "dotenv.py",
                                                    "home/.netrc", "netrc.py")), seen  # fmt: skip
