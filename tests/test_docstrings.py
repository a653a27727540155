"""The drop-in ``MultiheadAttention`` keeps its own docstring. Every public name of the
documented modules has one: tests/docs/test_reference.py."""


def test_multihead_attention_docstring_is_its_own() -> None:
    from attnkit.nn import MultiheadAttention

    assert MultiheadAttention.__doc__ is not None
    assert "swappable attention" in MultiheadAttention.__doc__
