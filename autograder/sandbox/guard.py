"""What graded code may do, enforced in the worker where it runs, not guessed from how it is spelled.

Why: the text rules (policy.py) read the cells, and every library function that evaluates a
string, copies a namespace or starts a process is one more spelling they must know. Here the
worker refuses the capability itself, before the first graded cell runs, with mechanisms graded
code cannot undo:

* a CPython audit hook (`sys.addaudithook`: it cannot be removed, and nothing lists it): no code
  run that was made after load (`exec`/`eval`, `marshal`, `pickle.find_class`, code or function
  objects made by hand), except the cells' own text, installed libraries' imports, and the stdlib
  generators correct code uses (`collections.namedtuple`, `dataclasses.dataclass`), recognised by
  the frame of their own entry standing between the event and any graded frame; no processes,
  `ctypes`, tracers, frames asked for by graded code, or the collector's lists; `import`
  statements only of the assignment's modules; no open of the course's or the engine's files; no
  rewriting of a function's code (but `types.coroutine`'s flag on a library's own function while
  the library is imported: `tqdm.auto` imports asyncio) or a library function's or class's special
  attributes.
* torch's dispatcher: every aten operator whose name is in the assignment's `forbidden` families
  gets a kernel that raises, so `F.layer_norm`, `torch.native_layer_norm`, `torch.ops.aten...`
  and whatever library path ends there fail alike; Python routines of those names (optimizers'
  `step`, `F.multi_head_attention_forward`, `clip_grad_norm_`, ...) get code that raises.

A refusal raises PermissionError (ImportError for an import) with a message the check shows.
"""
from __future__ import annotations

import _thread
import builtins
import functools
import keyword
import os
import re
import sys
import types
import warnings

CELL_PREFIX = "<graded cell "
SUBMISSION = "submission"  # the graded cells' module name: classes they define carry it

RUNTIME_CODE = ("graded code may not run code made at run time (eval/exec/compile, a string evaluated by a "
                "library, marshal or pickle, a code or function object made by hand); write the code itself "
                "in the graded cell")
PROCESS = ("graded code may not start programs or processes (subprocess, os.system, os.exec*, posix_spawn, "
           "fork, pty, a shell run by a library) or signal them; compute the result in Python")
CTYPES = "graded code may not use ctypes (raw memory and C calls)"
IMPORT = "graded cells may import only {allowed}; `{name}` is not one of them"
OPEN = "graded code may not open the grader's or the course's files ({path})"
PATCH = ("graded code may not change a library's functions or classes ({what}); write your own function "
         "or subclass instead")
TRACE = "graded code may not install tracers, profilers or audit hooks"
FRAMES = ("graded code may not reach frames, the garbage collector's lists or other threads' state "
          "(reflection); pass values as arguments instead")
BANNED = ("`{name}` computes what this assignment asks you to write yourself, so it is switched off in the "
          "grader, whatever name or library path reaches it; write it with basic tensor operations")

PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                            "os.forkpty", "pty.spawn", "os.startfile", "os.kill", "os.killpg",
                            "signal.pthread_kill"})
CODE_EVENTS = frozenset({"compile", "exec", "marshal.loads", "marshal.load", "code.__new__", "function.__new__"})
# refused to all but the import system and the worker's own trusted code (graded code, or a callback)
REFLECTION = frozenset({"sys.setprofile", "sys.settrace", "sys.addaudithook", "sys._current_frames",
                        "sys._current_exceptions", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                        "pickle.find_class"})
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})  # what hands out a frame
LISTING = frozenset({"os.listdir", "os.scandir", "glob.glob", "os.walk", "os.fwalk"})
WATCHED = (PROCESS_EVENTS | CODE_EVENTS | REFLECTION | LISTING
           | {"import", "open", "object.__setattr__", "object.__delattr__", "object.__getattr__", "sys._getframe"})

# Python routines that compute a banned family from allowed operators, looked up in these modules.
PY_MODULES = ("torch", "torch.functional")  # these modules, and every loaded module below these:
PY_TREES = ("torch.nn", "torch.optim", "torch._refs", "torch._decomp", "torch._prims")  # _refs, _decomp: Python references of aten operators


def rules_for(assignment) -> dict:
    """What the worker's guard needs for `assignment`, sent with the load request (plain JSON): the
    `forbidden` families (forbidden.Banned), the modules graded cells may import
    (policy.allowed_imports), the folders no graded code may open (the course's, as Landlock's),
    and, for a torch assignment, the banned aten operators and Python routines found here, so that
    each worker need not look for them (the same torch: the worker runs this interpreter's)."""
    from autograder.sandbox.files import _course_data
    from autograder.sandbox.forbidden import Banned
    from autograder.sandbox.policy import allowed_imports
    banned = Banned(assignment.forbidden)
    rules = {"family": banned.family.pattern if banned.family is not None else None,
             "exact": sorted(banned.exact), "imports": sorted(allowed_imports(assignment)),
             "deny": [str(p) for p in _course_data()]}
    if banned and assignment.uses_torch:
        rules.update(_torch_lists(rules["family"], tuple(rules["exact"])))
    return rules


@functools.lru_cache(maxsize=None)
def _torch_lists(family, exact) -> dict:
    import torch
    pattern = re.compile(family) if family else None

    def banned(name: str) -> bool:
        return name in exact or (pattern is not None and pattern.match(name) is not None)
    return {"ops": banned_ops(torch, banned),
            "routines": [f"{m}:{a}" for m, a, _ in banned_routines(banned, frozenset(exact))]}


def install(ns: dict, sources: tuple, rules: dict, report=None, trusted=()) -> dict:
    """Switch the banned routines off, give the cells checked imports, then add the audit hook.

    `ns`: the graded cells' globals; `sources`: the cells' source strings (the only text the worker
    may compile after this); `trusted`: code objects of the worker's own that may look at frames and
    the collector's lists (its error reports); `report(kind, detail)`: record instead of refusing
    (measurement only).
    Returns what was switched off (for tests and the bench)."""
    family = re.compile(rules["family"]) if rules.get("family") else None
    exact = frozenset(rules.get("exact", ()))

    def banned(name: str) -> bool:
        return name in exact or (family is not None and family.match(name) is not None)

    done = {"ops": [], "routines": []}
    torch = sys.modules.get("torch")
    if torch is not None and (family is not None or exact):
        with warnings.catch_warnings():  # "overriding a previously registered kernel", for each one
            warnings.simplefilter("ignore")
            done["ops"], keep = _switch_off_ops(torch, banned, rules.get("ops"))
        done["routines"] = _switch_off_routines(banned, exact, rules.get("routines"))
    else:
        keep = None
    allowed = frozenset(rules.get("imports", ())) | {"__future__"}
    ns["__builtins__"] = _checked_builtins(allowed, report)
    sys.addaudithook(_hook(ns, sources, allowed, rules, report, keep, frozenset(trusted)))
    return done


def _shown(allowed) -> str:
    return ", ".join(f"`{m}`" for m in sorted(allowed - {"__future__"}))


def _checked_builtins(allowed: frozenset, report) -> dict:
    """The cells' builtins: an `import` statement of a module outside the assignment's list fails.

    Why beside the hook: an import of a module already loaded raises no audit event. Only the
    statement is checked (the frame's instruction is IMPORT_NAME): C code that imports for itself
    from a graded frame (pickle, codecs) goes on. Graded code that reaches the real `__import__`
    through a module gets only modules, which hold nothing the hook does not guard."""
    import dis
    real, getframe, import_name = builtins.__import__, sys._getframe, dis.opmap["IMPORT_NAME"]

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A001 - replaces it
        if level == 0 and type(name) is str and name.partition(".")[0] not in allowed:
            caller = getframe(1)
            if caller.f_code.co_code[caller.f_lasti] == import_name:
                if report is None:
                    raise ImportError(IMPORT.format(allowed=_shown(allowed), name=name))
                report("import", name)
        return real(name, globals, locals, fromlist, level)

    mine = dict(builtins.__dict__)
    mine["__import__"] = __import__
    return mine


def _roots(paths) -> tuple:
    out = []
    for p in paths:
        try:
            out.append(os.path.realpath(p).rstrip(os.sep) + os.sep)
        except (OSError, ValueError):
            pass
    return tuple(out)


def _gate(checker, event, args):
    """The hook CPython calls (through a partial that holds `checker`). Why a function of its own,
    with no closure and its locals dropped before it raises: a refusal's traceback holds this frame,
    and graded code must find nothing there that leads to the checker's state."""
    verdict = checker(event, args)
    del checker
    if verdict is not None:
        error, message = verdict
        del verdict
        raise error(message)


def _hook(ns, sources, allowed, rules, report, keep, trusted):
    """The checker behind the audit hook: (exception, message) for a refusal, else None.

    It is a closure that graded code cannot reach (no frame of it outlives a check, `_gate` drops
    it, the collector's lists are refused), and it calls nothing that graded code could have
    rewritten: builtins, os functions and the objects it compares with are bound here at install,
    it resolves paths itself with the C functions, and it reads no dict whose keys graded code chose
    before checking that they are plain strings (a key's `__eq__` would run inside the check)."""
    import collections
    import dataclasses
    import importlib
    import importlib._bootstrap as bootstrap
    import importlib._bootstrap_external as external
    import stat

    import autograder
    engine = os.path.dirname(os.path.realpath(autograder.__file__))
    library = _roots({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                      *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))})
    deny = _roots([engine, *rules.get("deny", ())])
    generators = ((collections.__dict__, collections.namedtuple.__code__),  # (module globals, entry code)
                  (dataclasses.__dict__, dataclasses._process_class.__code__))
    dataclass_globals, field_type = dataclasses.__dict__, dataclasses.Field
    field_name = dataclasses.Field.__dict__["name"].__get__
    type_dict = type.__dict__["__dict__"].__get__
    type_qualname, type_name = type.__dict__["__qualname__"].__get__, type.__dict__["__name__"].__get__
    type_mro = type.__dict__["__mro__"].__get__
    find_and_load = bootstrap._find_and_load.__code__
    # `types.coroutine` sets a flag on the code of the generator functions it decorates: asyncio does
    # so while it is imported (`tqdm.auto` imports it), by a library, with no graded frame in between
    coroutine_code = types.coroutine.__code__
    importlib_globals = (bootstrap.__dict__, external.__dict__, importlib.__dict__)
    get_code = frozenset({external.SourceLoader.get_code.__code__, external.SourcelessFileLoader.get_code.__code__})
    function, code_type, module_type = types.FunctionType, types.CodeType, types.ModuleType
    iskeyword, is_link = keyword.iskeyword, stat.S_ISLNK
    type_, str_, bytes_, dict_, int_, issubclass_, any_, all_, max_, len_, list_ = (
        type, str, bytes, dict, int, issubclass, any, all, max, len, list)
    permission, import_error, os_error = PermissionError, ImportError, OSError
    getframe, get_ident, lstat, readlink, getcwd = sys._getframe, _thread.get_ident, os.lstat, os.readlink, os.getcwd
    sep, main_thread, shown = os.sep, _thread.get_ident(), _shown(allowed)
    inside: set = set()
    texts = frozenset(s.encode("utf-8", "surrogatepass") for s in sources)

    def no(kind, message, error=permission):
        if report is not None:
            report(kind, message)
            return None
        return error, message

    def resolve(path) -> str | None:
        """The real path of a str or bytes path, symlinks followed, with a trailing separator."""
        if type_(path) is bytes_:
            path = path.decode("utf-8", "surrogateescape")
        if type_(path) is not str_ or "\x00" in path:
            return None
        if not path.startswith(sep):
            path = getcwd() + sep + path
        done, todo, hops = [], path.split(sep), 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            here = sep + sep.join(done + [part])
            try:
                link = is_link(lstat(here).st_mode)
            except (os_error, ValueError):
                link = False
            if link and hops < 40:
                hops += 1
                target = readlink(here)
                if target.startswith(sep):
                    done = []
                todo = target.split(sep) + todo
                continue
            done.append(part)
        return sep + sep.join(done) + sep if done else sep

    def library_file(path) -> bool:
        p = resolve(path)
        return p is not None and any_(p.startswith(r) for r in library)

    def made_by_library(filename) -> bool:
        """A library file's code, or code a library module makes while it is imported ("<string>");
        never a file elsewhere (a module written to scratch and put on sys.path)."""
        if type_(filename) is bytes_:
            filename = filename.decode("utf-8", "surrogateescape")
        return type_(filename) is str_ and (not filename.startswith(sep) or library_file(filename))

    def denied(path) -> bool:
        """The deepest root the real path is under is one graded code may not open."""
        p = resolve(path)
        if p is None:
            return False
        d = max_((len_(r) for r in deny if p.startswith(r)), default=-1)
        return d > max_((len_(r) for r in library if p.startswith(r)), default=-1)

    def origin(frame):
        """Who asked, walking out from the event: 'graded' (a cell's frame first, or another
        thread), 'import' (the import system's entry), 'trusted' (the worker's own code that may
        use the collector) or 'worker' (a callback the worker ran, with no graded frame above it)."""
        while frame is not None:
            if frame.f_globals is ns:
                return "graded"
            code = frame.f_code
            if code is find_and_load:
                return "import"
            if code in trusted:
                return "trusted"
            frame = frame.f_back
        return "worker" if get_ident() == main_thread else "graded"

    def plain_keys(d) -> bool:
        return all_(type_(k) is str_ for k in d)

    def generator(frame) -> bool:
        """The event is a stdlib generator's own: walking out, only frames of its module until its
        entry (a dataclass's fields must be identifiers: they are written into its code)."""
        for module, entry in generators:
            f = frame
            while f is not None and f.f_globals is module:
                if f.f_code is entry:
                    return module is not dataclass_globals or fields_ok(f.f_locals)
                f = f.f_back
        return False

    def fields_ok(local) -> bool:
        cls = local["cls"] if type_(local) is dict_ and plain_keys(local) and "cls" in local else None
        if not issubclass_(type_(cls), type):
            return False
        for klass in type_mro(cls):
            d = type_dict(klass)
            if not plain_keys(d):
                return False
            names, fields = d.get("__annotations__", {}), d.get("__dataclass_fields__", {})
            if type_(names) is not dict_ or type_(fields) is not dict_ or not plain_keys(fields):
                return False
            every = list_(names) + [field_name(f) if type_(f) is field_type else None for f in fields.values()]
            if not all_(type_(n) is str_ and n.isidentifier() and not iskeyword(n) for n in every):
                return False
        return True

    def code_event(event, args, frame):
        if event == "compile":
            # Compiling runs nothing (typing compiles string annotations it may never evaluate): running
            # a code object is the exec event, making a function of one is function.__new__. Only the
            # cells' own name is kept for the cells' own text, so no other code passes for a cell.
            name = args[1]
            if type_(name) is bytes_:
                name = name.decode("utf-8", "surrogateescape")
            if type_(name) is str_ and name.startswith(CELL_PREFIX) and not (type_(args[0]) is bytes_ and args[0] in texts):
                return no(event, RUNTIME_CODE)
            return None
        if event == "exec":
            code = args[0]
            if type_(code) is code_type and code.co_filename.startswith(CELL_PREFIX) and code.co_name == "<module>":
                return None  # a graded cell: only a cell's own text compiles under that name
        if event == "exec" and generator(frame):
            return None
        if origin(frame) == "import":  # a library module being imported, no graded frame in between
            if event == "exec" and type_(args[0]) is code_type and made_by_library(args[0].co_filename):
                return None
            if event == "code.__new__" and frame.f_code is coroutine_code:
                return None  # asyncio's import flags its own functions' code (`from tqdm.auto import tqdm`)
            if event in ("marshal.loads", "marshal.load"):
                f = frame
                while f is not None and f.f_code not in get_code:
                    f = f.f_back
                local = f.f_locals if f is not None else {}
                where = local.get("bytecode_path") or local.get("path") if plain_keys(local) else None
                if type_(where) is str_ and library_file(where):
                    return None
        return no(event, RUNTIME_CODE)

    def patch(event, args, frame):
        obj, name = args[0], args[1]
        what = type_(obj)
        if what is function:
            if name == "__code__":
                if frame.f_code is coroutine_code and obj.__globals__ is not ns and origin(frame) == "import":
                    return None  # the same: a library's function given its own code with a flag set
                return no(event, PATCH.format(what="the code of a function"))
            if obj.__globals__ is not ns and origin(frame) not in ("import", "trusted") and not generator(frame):
                return no(event, PATCH.format(what=f"`{name}` of a library function"))
        elif issubclass_(what, type):
            d = type_dict(obj)
            mine = plain_keys(d) and type_(d.get("__module__")) is str_ and d.get("__module__") == SUBMISSION
            if not mine and not generator(frame) and origin(frame) not in ("import", "trusted"):
                qualname = type_qualname(obj)
                return no(event, PATCH.format(what=f"`{qualname if type_(qualname) is str_ else '?'}.{name}`"))
        elif name == "__class__" and issubclass_(what, module_type) and origin(frame) != "import":
            return no(event, PATCH.format(what="the class of a module"))
        return None

    def check(event, args, frame):
        if event in PROCESS_EVENTS:
            return no(event, PROCESS)
        if event.startswith("ctypes."):
            return no(event, CTYPES)
        if event in CODE_EVENTS:
            return code_event(event, args, frame)
        if event == "open" or event in LISTING:
            path = args[0] if args else None
            if path is None or type_(path) is int_:
                return None
            if type_(path) not in (str_, bytes_):
                if origin(frame) == "import":
                    return None  # a library reading its own files by a path object
                return no(event, OPEN.format(path=f"a path given as {type_name(type_(path))}"))
            if denied(path):
                where = resolve(path).rstrip(sep)
                return no(event, OPEN.format(path=where[where.rfind(sep) + 1:]))
            return None
        if event == "import":
            name, filename = args[0], args[1]
            if filename is not None:  # an extension module: native code only from installed libraries
                return None if library_file(filename) else no(event, RUNTIME_CODE, import_error)
            f = frame
            while f is not None and any_(f.f_globals is g for g in importlib_globals):
                f = f.f_back
            if f is not None and f.f_globals is ns and type_(name) is str_ and name.partition(".")[0] not in allowed:
                return no(event, IMPORT.format(allowed=shown, name=name), import_error)
            return None
        if event in ("object.__setattr__", "object.__delattr__"):
            return patch(event, args, frame)
        if event in ("object.__getattr__", "sys._getframe"):
            return no(event, FRAMES) if frame.f_globals is ns else None  # graded code itself asks for a frame
        if event in REFLECTION and origin(frame) not in ("import", "trusted"):
            return no(event, TRACE if event.startswith(("sys.set", "sys.add")) else
                      RUNTIME_CODE if event == "pickle.find_class" else FRAMES)
        return None

    def checker(event, args):
        if event not in WATCHED and not event.startswith("ctypes."):
            return None
        if event == "object.__getattr__" and args[1] not in FRAME_ATTRS:
            return None  # code objects (the hook's own frame walk reads f_code): harmless without exec
        me = get_ident()
        if me in inside:
            return None  # the sys._getframe just below
        inside.add(me)
        try:
            frame = getframe(2)  # the event's frame: above this checker and _gate
        finally:
            inside.discard(me)
        if keep is checker:  # never: keeps the dispatcher's registrations alive as long as the hook
            return None
        return check(event, args, frame)

    return functools.partial(_gate, checker)


# ---- banned routines ----------------------------------------------------------------------------

# Dispatch keys a banned operator's kernels are replaced on, where it has one (CPU, CUDA and Meta always).
_KEYS = ("CPU", "CUDA", "Meta", "QuantizedCPU", "QuantizedCUDA", "SparseCPU", "SparseCUDA", "NestedTensorCPU",
         "NestedTensorCUDA", "MkldnnCPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def banned_ops(torch, banned) -> list[str]:
    """aten operators (`name.overload`) whose own name is in a banned family."""
    out = []
    for qualified in torch._C._dispatch_get_all_op_names():
        ns, _, rest = qualified.partition("::")
        if ns == "aten" and banned(rest.partition(".")[0]):
            out.append(rest)
    return sorted(out)


def _switch_off_ops(torch, banned, ops=None):
    """Give every banned aten operator (`ops`: the grader's list) a kernel that raises, on every key it could run on."""
    lib = torch._C._dispatch_library("IMPL", "aten", "")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    ops = banned_ops(torch, banned) if ops is None else list(ops)
    for op in ops:
        name = op.partition(".")[0]
        qualified = "aten::" + op
        def kernel(*args, _message=BANNED.format(name=name), **kwargs):
            raise PermissionError(_message)
        if has(qualified, "CompositeImplicitAutograd"):
            lib.impl(op, "CompositeImplicitAutograd", kernel, False)
            keys = ("CPU", "CUDA")
        else:
            keys = [k for k in _KEYS if k in ("CPU", "CUDA", "Meta") or has(qualified, k)]
        for key in keys:
            lib.impl(op, key, kernel, False)
    return ops, lib


_TEMPLATES: dict[int, types.CodeType] = {}
_PLACEHOLDER = "\x00lmgrade-refused\x00"


def _raiser(message: str, nfree: int) -> types.CodeType:
    """Code that raises PermissionError(message), with `nfree` free variables (a closure's count)."""
    if nfree not in _TEMPLATES:
        names = [f"_free{i}" for i in range(nfree)]
        src = ("def _outer():\n" + "".join(f"    {n} = None\n" for n in names)
               + "    def refused(*args, **kwargs):\n"
               + (f"        ({', '.join(names)},)\n" if names else "")
               + f"        raise PermissionError({_PLACEHOLDER!r})\n    return refused\n")
        outer = compile(src, "<lmgrade guard>", "exec").co_consts[0]
        _TEMPLATES[nfree] = next(c for c in outer.co_consts if type(c) is types.CodeType)
    code = _TEMPLATES[nfree]
    return code.replace(co_consts=tuple(message if c == _PLACEHOLDER else c for c in code.co_consts))


def banned_routines(banned, exact, candidates=None) -> list[tuple[str, str, object]]:
    """(module, name, object) of torch's Python routines in a banned family: functions and classes,
    in the modules PY_MODULES names and the loaded modules below PY_TREES. `candidates`: the
    "module:name" pairs to look at (the grader's list), instead of every name of those modules."""
    out, seen = [], set()
    if candidates is not None:
        pairs = []
        for pair in candidates:
            modname, _, attr = pair.partition(":")
            module = sys.modules.get(modname)
            if isinstance(module, types.ModuleType) and attr in vars(module):
                pairs.append((modname, attr, vars(module)[attr]))
    else:
        pairs = [(modname, attr, obj) for modname, module in list(sys.modules.items())
                 if isinstance(module, types.ModuleType) and (modname in PY_MODULES or any(
                     modname.startswith(m + ".") or modname == m for m in PY_TREES))
                 for attr, obj in list(vars(module).items())]
    for modname, attr, obj in pairs:
        whole = any(part in exact for part in modname.split("."))  # e.g. torch.optim.lr_scheduler
        if not (whole or banned(attr)) or id(obj) in seen:
            continue
        home = str(getattr(obj, "__module__", "") or "")
        if not home.startswith("torch") or (whole and not banned(attr) and home != modname):
            continue  # a whole module is banned for what it defines, not for what it imports
        if type(obj) is types.FunctionType or isinstance(obj, type):
            seen.add(id(obj))
            out.append((modname, attr, obj))
    return out


def _switch_off_routines(banned, exact, candidates=None) -> list[str]:
    """Replace the code of each banned routine (a class: every method it defines) by a raiser."""
    done = []
    for modname, attr, obj in banned_routines(banned, exact, candidates):
        message = BANNED.format(name=f"{modname}.{attr}")
        functions = [obj] if type(obj) is types.FunctionType else [
            getattr(value, "__func__", value) for value in list(vars(obj).values())]
        for fn in functions:
            if type(fn) is types.FunctionType:
                _replace(fn, message)
        done.append(f"{modname}.{attr}")
    return sorted(done)


def _replace(fn, message: str) -> None:
    fn.__code__ = _raiser(message, len(fn.__code__.co_freevars))
