"""Results as files: finished cells in a folder, moved to and from an MLflow store, reported from the folders alone."""
