"""The optional compiled decoders (``ackstore._native``); everything else is in pyproject.toml.

``optional=True``: where no C compiler or no Python headers exist, the build of the
extension fails quietly and ackstore uses its pure-Python twins (``ackstore.storage.codecs``);
the wheel is then tagged ``py3-none-any``, as it holds no compiled code. On Linux the
extension is linked stripped (its symbols are of no use to a user and triple its size).
"""

from __future__ import annotations

import os
import sys

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


setup(
    ext_modules=[
        Extension(
            "ackstore._native",
            [
                "ackstore/_module.c",
                "ackstore/_native.c",
                "ackstore/_lane.c",
                "ackstore/_fields.c",
                "ackstore/_small.c",
            ],
            depends=["ackstore/_native.h"],
            optional=True,
            extra_link_args=["-s"] if sys.platform.startswith("linux") else [],
        )
    ],
    cmdclass={"bdist_wheel": _Wheel},
)
