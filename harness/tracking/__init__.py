"""MLflow tracking: the store, the runs a process opens, their names, params and views, and the UI."""
