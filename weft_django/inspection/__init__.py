"""Read-only queries over runs and engines that the admin and ``manage.py
weft`` share (both hosts; this wing sits below them, in the public layer, and
imports neither): :mod:`.stuck` (stuck runs), :mod:`.timeline` (what an event
says in words, what is pending for a run), :mod:`.engines` (claims held per
engine, capped)."""
