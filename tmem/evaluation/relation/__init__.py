"""Measurements of the relation role that the pipeline does not run (measured, not wired; the role itself is
tmem/models/relation/, and `fit-relation` is tmem/evaluation/fit_relation.py):
- scorer.py: the local model as a yes/no relation scorer (scripts/measure_relation_scorer.py, docs/backends.md);
The scripts of scripts/ run them on the dev splits; the tests test these modules, never the scripts.
Nothing is imported here.
"""
