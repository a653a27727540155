"""``attnkit.families``, kept for one release (README, "Where things moved"): the task
families are now :mod:`attnkit.tasks`; ``attnkit.families.caption`` etc. are the same modules
as ``attnkit.tasks.caption`` etc."""
