"""Settings: the schema and its loading, their docs, the rules built from them, optional extras."""
