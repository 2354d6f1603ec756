"""Controller-side aggregation of item records: terminal summary and report files."""
