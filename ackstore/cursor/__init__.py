"""The cursor: a facade (:class:`Cursor`) over its ack state, pages and flush plan."""

from __future__ import annotations

from .facade import Cursor
from .lane import MarkerPlan
from .plan import AnyPlan, FlushPlan, RewritePlan
from .state import MAX_BATCH_SIZE, MAX_PROPERTY_KEY_BYTES

__all__ = ["AnyPlan", "Cursor", "FlushPlan", "MarkerPlan", "RewritePlan", "MAX_BATCH_SIZE", "MAX_PROPERTY_KEY_BYTES"]
