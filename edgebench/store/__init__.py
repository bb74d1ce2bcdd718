"""The results store (SQLite / PostgreSQL)."""
