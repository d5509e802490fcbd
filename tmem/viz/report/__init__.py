"""Self-contained HTML that opens from a file: one question's report (with static SVG pictures) and a batch run's
static site."""
