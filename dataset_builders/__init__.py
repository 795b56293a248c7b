"""``datasets.GeneratorBasedBuilder`` subclasses that ``findbench build …`` runs.

datasets 5 no longer runs loading scripts, so these builders are run by the package and
write parquet + README card folders that ``datasets.load_dataset(folder, config)`` reads.
"""
