"""Measurements of the relation role that the pipeline does not run (measured, not wired; the role itself is
tmem/models/relation/, and `fit-relation` is tmem/evaluation/fit_relation.py):
- scorer.py: the local model as a yes/no relation scorer (scripts/measure_relation_scorer.py, docs/backends.md);
- ceilings.py: what an oracle or one more feature adds to the fitted role (scripts/relation_ceilings.py);
- probes.py: readings measured before building any into the role (scripts/relation_probes.py);
- update_sides.py: the UPDATE edges of the demo's forests and their sides (scripts/demo_update_sides.py).
The scripts run them (on the dev splits, or on the demo); the tests test these modules, never the scripts.
Nothing is imported here.
"""
