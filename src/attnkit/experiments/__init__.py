"""Experiments that reproduce the figures of papers on data generated here."""
