"""Views over stored runs (Failures, Compare, Sweep, judge audit, recall curves): result rows and their tables, the
review columns, paired significance, annotations."""
