"""No patched third-party internals: Mirador uses other packages through their public API and never writes
into them (issue 42). A patch holds only while the package's insides stay as they were: an upgrade breaks it
silently, and a pin to hold it back is a patch of its own.

An AST scan of every module of ours (tests aside: pytest's monkeypatch undoes itself) fails on
- an assignment, augmented assignment or del whose target is an attribute or item of a third-party module
  or of anything imported from one: `sdk_module.attr = …`, `SdkClass.method = …`, `sdk_dict["key"] = …`;
- setattr() or delattr() on such a name;
- an import from a third-party package's private module (`pydantic._internal…`);
- a subclass of a third-party class that overrides one of that class's private `_methods`;
- an assignment to a dunder of any object but self/cls (`module.__getattr__ = …`, `obj.__class__ = …`): a module
  the import system made for a package, or any other object, gets its hooks from a class body of ours instead.
The standard library is not in scope: the process state it documents (sys.stdout, sys.modules, os.environ)
is there to be set. Nor is a setting a package documents as set this way (SETTINGS, each with its source).
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("desktop", "capture", "memory", "models", "bench", "scripts", "installer", "tests")
SCANNED = ("desktop", "capture", "memory", "models", "bench", "scripts", "installer")
# Public settings a package documents as an assignment, and where it says so.
SETTINGS = {
    "pytesseract.pytesseract.tesseract_cmd": "pytesseract's README, 'Usage': the tesseract binary when not on PATH",
}


def _foreign(module: str | None, level: int = 0) -> bool:
    """A third-party module: not ours (relative imports are), not the standard library."""
    if level or not module:
        return False
    top = module.split(".")[0]
    return top not in OURS and top not in sys.stdlib_module_names


def _private_part(module: str) -> str | None:
    return next((p for p in module.split(".")[1:] if p.startswith("_") and not p.startswith("__")), None)


def _root(node: ast.AST) -> str | None:
    """The name an attribute or item chain starts at (`a` for a.b[c].d), or None."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Scan(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.foreign: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute imported or None)
        self.found: list[str] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.path}:{getattr(node, 'lineno', '?')}: {what}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _foreign(alias.name):
                if _private_part(alias.name):
                    self._flag(node, f"imports the private module {alias.name}")
                if alias.asname:
                    self.foreign[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    self.foreign[top] = (top, None)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not _foreign(node.module, node.level):
            return
        assert node.module is not None
        if _private_part(node.module):
            self._flag(node, f"imports from the private module {node.module}")
        for alias in node.names:
            self.foreign[alias.asname or alias.name] = (node.module, alias.name)

    def _target(self, target: ast.AST, verb: str) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._target(t, verb)
        elif isinstance(target, ast.Attribute) and target.attr.startswith("__") and target.attr.endswith("__") \
                and _root(target) not in ("self", "cls"):
            # `module.__getattr__ = …`, `obj.__class__ = …`: an object's own hooks rewritten from outside, whatever
            # the object (a module the import system made for a package, a stand-in); a class says them in its body
            self._flag(target, f"{verb} {ast.unparse(target)}, a hook of an object not defined here")
        elif isinstance(target, ast.Attribute | ast.Subscript) and _root(target) in self.foreign \
                and ast.unparse(target) not in SETTINGS:
            self._flag(target, f"{verb} {ast.unparse(target)}, inside the third-party {_root(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._target(t, "assigns")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, "assigns")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._target(node.target, "assigns")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._target(t, "deletes")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in ("setattr", "delattr") and node.args \
                and _root(node.args[0]) in self.foreign:
            self._flag(node, f"{fn.id}() on the third-party {_root(node.args[0])}")
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        private = [f for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                   and f.name.startswith("_") and not f.name.startswith("__")]
        for base in node.bases:
            cls = self._resolve(base) if private else None
            for f in private:
                if cls is not None and hasattr(cls, f.name):
                    self._flag(f, f"{node.name} overrides {cls.__module__}.{cls.__qualname__}.{f.name}, a private "
                                  "method of a third-party class")
        self.generic_visit(node)

    def _resolve(self, base: ast.AST) -> type | None:
        """The third-party class a base expression names, imported (None: not third-party, or not importable)."""
        chain = []
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if isinstance(base, ast.Subscript):  # Generic[...] and the like: the class before the brackets
            return self._resolve(base.value)
        if not isinstance(base, ast.Name) or base.id not in self.foreign:
            return None
        module, attr = self.foreign[base.id]
        try:
            obj = importlib.import_module(module)
            for name in ([attr] if attr else []) + chain:
                obj = getattr(obj, name)
        except Exception:  # not installed here (another platform's package): nothing to check against
            return None
        return obj if isinstance(obj, type) else None


def scan(source: str, path: str = "<source>") -> list[str]:
    """What the rules above find in one module's source."""
    s = _Scan(path)
    s.visit(ast.parse(source))
    return s.found


def test_no_module_of_ours_patches_a_third_party_package():
    found = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += scan(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "third-party internals patched (use the package's public API instead):\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import overrides\noverrides.override = lambda m: m",
    "from mcp.server.lowlevel import server as lowlevel\nlowlevel.jsonschema = object()",
    "import mcp.server.lowlevel.server\nmcp.server.lowlevel.server.jsonschema = None",
    "from pydantic import BaseModel\nBaseModel.model_config['extra'] = 'forbid'",
    "from pydantic._internal._config import config_defaults",
    "import overrides\nsetattr(overrides, 'override', print)",
    "import overrides\ndel overrides.override",
    "from mcp.server.lowlevel import Server\nclass S(Server):\n    async def _handle_discover(self, *a):\n        pass",
    "import importlib.util\nm = importlib.util.module_from_spec(spec)\nm.__getattr__ = lambda a: None",
    "import types\nstub = types.ModuleType('av')\nstub.__getattr__ = print",
    "import sys\nsys.modules['x'].__class__ = object",
])
def test_the_scan_finds_each_kind_of_patch(source):
    assert scan(source)


@pytest.mark.parametrize("source", [
    "import sys\nsys.stdout = sys.stderr",  # the standard library's documented state
    "import pytesseract\npytesseract.pytesseract.tesseract_cmd = '/opt/bin/tesseract'",  # a documented setting
    "from mcp.server.lowlevel import Server\nclass S(Server):\n    def _mine(self):\n        pass",  # its own helper
    "from mcp import types\nresult = types.CallToolResult(content=[])\nresult.is_error = True",  # an object we made
    "from memory.errors import MiradorError\nMiradorError.code = 'x'",  # ours
])
def test_the_scan_leaves_public_use_alone(source):
    assert not scan(source)
