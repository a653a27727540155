"""The kinds of task, one ``Family`` a module (train/family.py): each glues a
task's data, its models, its metrics and its view into what training, ``attnkit evaluate``,
``view`` and ``translate`` call. ``translate`` (tokens -> tokens) is one of them like the
others. They sit above train/ and viz/ (they use both), so neither of those imports them;
``FAMILIES`` in train/family.py names them by module path and imports one when first asked
for. (``attnkit.families``, the old name of this package, still imports for one release.)"""
