"""Evidence -> verdict. Pure: no I/O imports (checked by import-linter)."""
