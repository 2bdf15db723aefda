"""The read path: revision controller, readers, read loop, dispatcher and replicator.

They use a cursor through a small protocol (``CursorPositions`` in ``read_loop``): reset,
rewind and moving the read position, never its private state."""
