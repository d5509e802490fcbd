"""`python -m tmem COMMAND ...` — a thin layer over the library; each command lives in its own module."""
from tmem.cli import main

raise SystemExit(main())
