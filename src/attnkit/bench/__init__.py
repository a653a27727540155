"""``attnkit bench``: time, achieved FLOP rate and peak memory of attnkit's attention kernels
and the anchors they are held to (naive PyTorch, SDPA with a dense band mask, FlexAttention,
lucidrains' ``local-attention``), all measured in one run against this machine's matmul rate.

variants.py   what is measured (one small callable per variant)
measure.py    how: warm-up, median of repeats, matmul rate, peak RSS in a fresh process
suite.py      which sizes, what to skip, the table, the JSON and the plots
"""
