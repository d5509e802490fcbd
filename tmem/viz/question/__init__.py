"""The Question view's models for one stored trace: the anchor timeline, the evidence forest and its layout, state
as of a moment, compressed spans, the answer cards, the structuring decisions against gold, and the what-if on k."""
