"""What the service keeps for the indexes it serves: the registry, each served index and its
writer, fit-on-arrival, point operations, creation specs, encoders and background jobs."""
