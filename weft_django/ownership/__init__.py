"""The ownership protocol of DESIGN.md §4: gates, claims, fencing, renewal, metrics."""
