"""The renewal loop's passes, as the ownership protocol defines them
(docs/ownership.md, "The renewal loop"): the scans' queries (:mod:`.scans`),
the reclaim scan (:mod:`.reclaim`) and its batched takeover (:mod:`.takeover`),
the owner-side signal and update polls (:mod:`.signal_poll`,
:mod:`.update_poll`), and the outcome vocabulary they report (:mod:`.outcomes`).
"""
