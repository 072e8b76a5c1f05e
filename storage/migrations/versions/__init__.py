"""One module per schema revision, oldest first (0001 is the schema of release 0.1.0)."""
