"""Batches made ready off the learner's thread: their camera frames decoded into pixels (each frame once, kept in a
frame cache, decoded on threads or a GPU) and the next batch prepared in the background while the learner trains."""
