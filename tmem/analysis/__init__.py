"""What the explorer's views and the evaluation both compute over stored traces: the evidence funnel and failure
attribution, judge verdicts and their human overrides, annotations and their staleness, paired significance,
and the what-if on k."""
