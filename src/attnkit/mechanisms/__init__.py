"""Attention mechanisms from papers, built from the stages: hard (Xu 2015), variational (Deng
2018), multi-dimensional (Shen 2018), co-attention (Lu 2016), stacked (Yang, He et al. 2016),
hierarchical (Yang, Yang et al. 2016), directional self-attention (DiSAN, Shen 2018) and the
one-query step of a recurrent decoder (Bahdanau 2015). Models use them; they never import a model.
"""
