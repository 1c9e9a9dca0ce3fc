"""The team's tracking server: MLflow with its auth app, its users, its PostgreSQL and its secrets."""
