"""Export: the SavedModel translator (strings in, strings + attention out) and the pyfunc."""
