"""The task families other than translation (see attnkit/train/family.py): each module glues
a task's data, its models, its metrics and its view into one ``Family``. They sit above
train/ and viz/ (they use both), so neither of those imports them; ``FAMILIES`` in
train/family.py names them by module path and imports one when first asked for."""
