"""attnkit inside other libraries: Hugging Face Transformers (``attnkit.hf``, its public name,
registers attnkit's attention functions). PyTorch's drop-in ``MultiheadAttention`` is
``attnkit.nn``.
"""
