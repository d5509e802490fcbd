"""Importers: one module per source format, each mapping its source to the common representation
(paper App. A.3 Table 4) and returning a `tmem.types.CorpusData` for a transactional load."""
