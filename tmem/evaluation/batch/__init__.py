"""Stage-wise batch runs (paper App. D): the runner and its stage records with resume, the manifest, validators,
the summary, spend and cost estimates, runs through a provider's batch API, and runs started from the app."""
