"""A benchmark's report: its tables, remarks, study table, figures, console summary and the parent run's view."""
