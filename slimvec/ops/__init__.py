"""Operations on a whole index, each through the one writer (:mod:`slimvec.indexer`): sync,
rebuild, snapshot / restore, compact and recalibrate."""
