"""The paper's pipeline for one question (Fig. 1): the stages (`stages`, handing each other `stage_results`),
the algorithms they run, one module per section, and `run.run_question`, the stages in a row."""
