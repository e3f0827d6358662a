"""The ownership protocol (docs/ownership.md): gates, claims, fencing, modes, passes, metrics."""
