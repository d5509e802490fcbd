"""Diagnostics of Temporal Memory Structuring against gold edges (docs/evaluation.md, "Diagnostics"):
- confusion.py: the confusion gold x built split by right and wrong parent, and the error class of each miss
  (`python -m tmem links`, the Structuring page);
- leave_one_out.py: leave-one-style-out scoring of every offline relation rule (`links --leave-one-out`).
Nothing is imported here: tmem/evaluation/links.py imports confusion.py, and leave_one_out.py imports links.
"""
