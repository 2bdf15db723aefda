"""The decoder implementations a test runs on: the pure-Python twins always, the compiled
module where it was built (``make test`` builds it; CI must have it: see test_codecs)."""

from __future__ import annotations

import os
import random
from types import ModuleType

from ackstore.storage import codecs, pure_acks, pure_codecs

__all__ = ["IMPLEMENTATIONS", "NOT_COMPILED", "PURE", "damaged"]

PURE = ModuleType("ackstore.storage pure twins")
"""the pure-Python twins of the compiled module's codecs, as one namespace"""
PURE.__dict__.update({k: v for k, v in vars(pure_codecs).items() if not k.startswith("__")})
PURE.__dict__.update({k: v for k, v in vars(pure_acks).items() if not k.startswith("__")})

IMPLEMENTATIONS: list[ModuleType] = [PURE] + ([codecs.native] if codecs.native is not None else [])

#: why a test of the compiled module skips when it is not in use: switched off for this run
#: (``make test``'s second pass), or not built at install
NOT_COMPILED = (
    "ACKSTORE_PURE_PYTHON is set: the compiled module is switched off for this run"
    if os.environ.get("ACKSTORE_PURE_PYTHON")
    else "the compiled module is not built (no C compiler or Python headers at install)"
)


def damaged(data: bytes, rng: random.Random) -> bytes:
    """``data`` damaged as a disk or a bad write might: a bit flipped, a byte cut off the end,
    or a few bytes added."""
    kind = rng.randrange(3)
    if kind == 0 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if kind == 1 and data:
        return data[: rng.randrange(len(data))]
    return data + rng.randbytes(rng.randrange(1, 6))
