"""Drop-in reducer for an existing vector collection: ``slimvec migrate`` and its sources."""

from slimvec.migrate.run import MigrateOptions, migrate
from slimvec.migrate.sources import VectorSource, open_source

__all__ = ["MigrateOptions", "migrate", "open_source", "VectorSource"]
