"""Commands that run and score the pipeline over a corpus: batch runs, sweeps, recall, links, the benchmark, the
fitted relation role, annotations and reports."""
