"""Run directory(ies) → one self-contained report.html: the report, its sections, compare, the figure cache.
It reads run directories and imports suite (stages' texts, results, hardware); nothing from provisioning.
Imported by suite.commands (a run's report) and provisioning (a fetched run's); `python -m reports RUN`.
"""
