"""The optional compiled decoders (``ackstore._native``); everything else is in pyproject.toml.

``optional=True``: where no C compiler or no Python headers exist, the build of the
extension fails quietly and ackstore uses its pure-Python twins (``ackstore.storage.codecs``);
the wheel is then tagged ``py3-none-any``, as it holds no compiled code. On Linux the
extension is linked stripped (its symbols are of no use to a user and triple its size).
With GCC its files are optimised as one (link-time optimisation) and only its module's
entry is exported: a one-position ``Cursor.ack`` crosses three of its files, and as one
the call costs about a tenth less.
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel


class _Wheel(bdist_wheel):
    """A wheel tagged for the platform only when the extension was built."""

    def run(self) -> None:
        self.run_command("build")  # first: whether the optional extension built decides the tag
        build_ext = self.get_finalized_command("build_ext")
        if not any(os.path.exists(path) for path in build_ext.get_outputs()):
            self.root_is_pure = True
            self.distribution.ext_modules = []  # and installed as one: the package in purelib
        super().run()


HERE = Path(__file__).resolve().parent
#: the C compiler the extension is built with (Python's own, as setuptools takes it)
GCC = sys.platform.startswith("linux") and "gcc" in os.path.basename(
    (os.environ.get("CC") or sysconfig.get_config_var("CC") or "").split(" ")[0]
)
GENERATED = HERE / "build" / "generated"


def fields_layout(fields_py: Path = HERE / "ackstore" / "fields.py") -> dict[str, list[str]]:
    """Each field type ``ackstore/fields.py`` declares and its fields, in order: read from
    its source (``_DECLARED`` and the classes it names), not by importing the package."""
    tree = ast.parse(fields_py.read_text())
    classes = {
        node.name: [a.target.id for a in node.body if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)]
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "_DECLARED" and isinstance(node.value, ast.Dict):
                return {
                    key.value: classes[value.id]
                    for key, value in zip(node.value.keys, node.value.values, strict=True)
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Name)
                }
    raise SystemExit(f"{fields_py} declares no _DECLARED field types")


def write_fields_layout(out: Path = GENERATED / "_fields_layout.h") -> None:
    """``_fields_layout.h``: an index per declared field (``F_<Type>_<field>``) and the whole
    declaration as one string, which ``fields_type`` checks the types it makes against."""
    layout = fields_layout()
    lines = ["/* Written by setup.py from ackstore/fields.py: do not edit. */", "#pragma once"]
    for type_name, names in layout.items():
        indices = ", ".join(f"F_{type_name}_{name} = {i}" for i, name in enumerate(names))
        lines.append(f"enum {{ {indices} }};")
    declared = ";".join(f"{t}:{','.join(names)}" for t, names in layout.items())
    lines.append(f'#define FIELDS_DECLARED "{declared}"')
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text() != text:
        out.write_text(text)


write_fields_layout()

setup(
    ext_modules=[
        Extension(
            "ackstore._native",
            [
                "ackstore/_module.c",
                "ackstore/_native.c",
                "ackstore/_acks.c",
                "ackstore/_walk.c",
                "ackstore/_fields.c",
                "ackstore/_small.c",
                "ackstore/_chain.c",
                "ackstore/_ack.c",
                "ackstore/_lock.c",
                "ackstore/_puts.c",
            ],
            include_dirs=[str(GENERATED)],
            depends=["ackstore/_native.h", "ackstore/_chain.h", "ackstore/fields.py"],
            optional=True,
            # a function used before it is declared is an error, not a module that fails to load
            extra_compile_args=(
                []
                if sys.platform == "win32"
                else ["-Werror=implicit-function-declaration"] + (["-flto=auto", "-fvisibility=hidden"] if GCC else [])
            ),
            extra_link_args=(["-s"] if sys.platform.startswith("linux") else []) + (["-flto=auto"] if GCC else []),
        )
    ],
    cmdclass={"bdist_wheel": _Wheel},
)
