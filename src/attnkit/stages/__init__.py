"""The stages of the pipeline, one file each: attention = score -> alignment (which keys, with
which prior) -> normaliser -> reduction (core.py puts them together).

    scores.py        how well a query matches a key (dot, general, additive, scaled, location)
    alignment.py     which keys a query may reach, with which prior (global, local-m/p, sliding)
    normalisers.py   scores to weights (softmax, sparsemax, entmax)
    reduction.py     weights and values to a context (the weighted sum; a sample for hard)
    capabilities.py  what a stage declares it supports, read by the fast paths

A new score, alignment or normaliser is a small callable in its file plus one line in
``attnkit.registry``. These modules import nothing of attnkit above them (tests/test_layers.py).
"""
