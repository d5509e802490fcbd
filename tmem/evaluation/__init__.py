"""Evaluation: evidence funnel and failure attribution, metrics, batch runs with resume, recall, link scoring,
and performance benchmarks (paper Sec. 5, App. A.4, D, E)."""
