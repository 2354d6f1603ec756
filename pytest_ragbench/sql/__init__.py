"""Read-only SQL execution and result comparison for SQL ground truth."""
