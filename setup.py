"""The optional compiled decoders (``ackstore._native``); everything else is in pyproject.toml.

``optional=True``: where no C compiler or no Python headers exist, the build of the
extension fails quietly and ackstore uses its pure-Python twins (``ackstore.storage.codecs``).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ackstore._native", ["ackstore/_native.c", "ackstore/_lane.c"], optional=True)])
