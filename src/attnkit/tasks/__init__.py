"""The kinds of task, one ``Family`` a module (the type in family.py, the names they are found
by in registry.py): each glues a task's data, its models, its metrics and its view into what
training, ``attnkit evaluate``, ``view`` and ``translate`` call. ``translate`` (tokens ->
tokens) is one of them like the others. They sit below train/ (``attnkit.fit`` resolves a
run's family here and passes it to the loop) and above viz/ (whose viewers they call): neither
train/ nor viz/ is imported from here."""
